// CudaExecutor: one rank's engine on a GPU — the CUDA twin of ModelExecutor with the same contract:
// Execute(StepPlan) → StepResult, plan errors refused before the cache is touched, every rank of a
// tensor-parallel group returning the same result. It owns this rank's device weight shard (the
// same ShardPlan slices as the CPU engine), a device KV pool of the same block layout
// ([L][2][num_blocks][block_size][Hkv][D] f32), one stream and one cuBLAS handle. The two
// all-reduces of every layer run over NCCL on that stream (TP > 1); the logits shard comes back to
// the host and the CPU sampler (worker/sampler.h) picks the tokens, so token choice follows exactly
// the same rules as on the CPU.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "comm/step_plan.h"
#include "common/status.h"
#include "model/model_config.h"
#include "model/weight_source.h"
#include "worker/cuda/cuda_llama_model.h"
#include "worker/cuda/device_buffer.h"
#include "worker/model_executor.h"
#include "worker/step_batch.h"
#include "worker/step_executor.h"

namespace tpserve {

class ModelFile;

class CudaExecutor : public StepExecutor {
 public:
  // Picks this rank's GPU (the rank's index on its host, OMPI_COMM_WORLD_LOCAL_RANK, modulo the
  // visible devices), loads its weight slices onto it and allocates its KV shard there
  // (options.num_kv_blocks, else as many blocks as options.kv_memory_bytes holds).
  // `comm` is the group's host communicator, borrowed (it must outlive the executor): the sampler's
  // small all-gathers use it, and when its size is above 1 it must be an MpiCommunicator, which
  // bootstraps the NCCL communicator of the layers' all-reduces.
  // Errors: FAILED_PRECONDITION (no CUDA device visible; fewer GPUs on this host than TP ranks),
  // INVALID_ARGUMENT (bad options, TP degree, a comm that cannot bootstrap NCCL), RESOURCE_EXHAUSTED
  // (device memory), the model reader's errors, NCCL's (UNAVAILABLE, DEADLINE_EXCEEDED).
  static StatusOr<std::unique_ptr<CudaExecutor>> Create(const ModelFile& model, Communicator* comm,
                                                        const ExecutorOptions& options);
  static StatusOr<std::unique_ptr<CudaExecutor>> Create(const ModelConfig& config, const WeightSource& weights,
                                                        Communicator* comm, const ExecutorOptions& options);
  ~CudaExecutor() override;

  // As ModelExecutor::Execute. A device fault surfacing at the step's synchronisation is INTERNAL;
  // a failed all-reduce is the communicator's error. After an error other than INVALID_ARGUMENT the
  // executor is unusable.
  StatusOr<StepResult> Execute(const StepPlan& plan) override;

  const ModelConfig& config() const { return model_->config(); }
  const ShardPlan& shard() const { return model_->shard(); }
  int64_t num_kv_blocks() const { return num_kv_blocks_; }
  int block_size() const { return block_size_; }
  int64_t weight_bytes() const { return model_->weight_bytes(); }  // device bytes of this rank's weights
  int64_t weight_bytes_per_step() const { return model_->WeightBytesPerStep(); }
  int device() const { return device_; }
  std::string device_name() const { return device_name_; }
  // "N blocks = M tokens (X MiB of device KV) on <GPU name>"
  std::string CapacityReport() const;

 private:
  CudaExecutor() = default;
  Status UploadStep();  // batch_ → the device's step arrays, step_ pointing at them

  Communicator* host_comm_ = nullptr;
  std::unique_ptr<Communicator> device_comm_;  // NCCL over host_comm_ (TP > 1), else the local one
  int device_ = 0;
  std::string device_name_;
  int block_size_ = 16;
  int64_t num_kv_blocks_ = 0;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  std::unique_ptr<CudaLlamaModel> model_;
  DeviceBuffer kv_;                     // [L][2][num_blocks][block_size][Hkv][D] f32
  std::vector<DeviceLayerKv> kv_layers_;  // [L] views into kv_
  int64_t kv_block_bytes_ = 0;          // bytes of one block of one layer's K (or V)

  StepBatch batch_;                  // the flattened step on the host (rebuilt by every Execute)
  std::vector<int32_t> step_host_;   // the step's int arrays packed back to back, uploaded at once
  DeviceBuffer step_device_;         // [step_host_.size()] int32
  DeviceStep step_;                  // pointers into step_device_
  DeviceBuffer logits_device_;       // [S_needing, V_shard]
  std::vector<float> logits_;        // [S_needing, V_shard] host copy for the sampler
};

}  // namespace tpserve
