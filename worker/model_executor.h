// ModelExecutor: one rank's engine. It owns this rank's weight shard, its shard of the paged KV cache
// and its kernel threads, and executes one StepPlan at a time. Every rank of a tensor-parallel group
// executes the same plan; collectives inside the layers keep them in step, and every rank returns the
// same StepResult.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "comm/communicator.h"
#include "comm/step_plan.h"
#include "common/status.h"
#include "common/thread_pool.h"
#include "kvstore/kv_layout.h"
#include "kvstore/kv_pool.h"
#include "model/model_config.h"
#include "worker/llama_model.h"
#include "worker/shard_plan.h"
#include "worker/step_batch.h"

namespace tpserve {

class ModelFile;

struct ExecutorOptions {
  int tp_rank = 0;
  int tp_size = 1;
  int block_size = 16;
  int64_t num_kv_blocks = 0;  // 0: from kv_memory_bytes
  int64_t kv_memory_bytes = int64_t{256} << 20;
  int num_threads = 0;  // 0: ThreadPool::DefaultThreads()
  int poll_us = -1;     // kernel threads poll this long for work before sleeping; < 0: ThreadPool::DefaultPollMicros()
  bool merge_column_parallel = true;  // see LlamaModel::Load; false only for A/B checks
  // Sliding-window layers get pages of their own that the coordinator frees once they fall out of the
  // window (KvLayout::Windowed; block tables then hold a page per layer group). false: one group of
  // every layer (KvLayout::Shared), the table tpserve-run and the tests build by hand.
  bool free_sliding_kv = false;
  DType kv_dtype = DType::kF32;  // the KV cache's element type: F32, F16, BF16 or Q8_0 (IsKvDType)
};

// The KV layout an executor with `options` uses for `config`.
KvLayout ExecutorKvLayout(const ModelConfig& config, const ExecutorOptions& options);

// Checks the options against the group (`comm`'s rank and size must equal tp_rank / tp_size; a positive
// block size) and plans this rank's shard of `config`, slicing the row-parallel weights of `weights` on
// their blocks: the first step of every executor's Create. Errors: INVALID_ARGUMENT.
StatusOr<ShardPlan> PlanExecutorShard(const ModelConfig& config, const WeightSource& weights,
                                      const Communicator& comm, const ExecutorOptions& options);

class ModelExecutor {
 public:
  // Loads this rank's weight slices and allocates its KV shard. `comm` is borrowed and must outlive the
  // executor; its rank and size must match options.tp_rank / tp_size.
  // Errors: INVALID_ARGUMENT (bad options or TP degree), RESOURCE_EXHAUSTED (no room for one KV block),
  // and the model reader's errors.
  static StatusOr<std::unique_ptr<ModelExecutor>> Create(const ModelFile& model, Communicator* comm,
                                                         const ExecutorOptions& options);
  // The same, from a config and a weight source (tests, tools).
  static StatusOr<std::unique_ptr<ModelExecutor>> Create(const ModelConfig& config, const WeightSource& weights,
                                                         Communicator* comm, const ExecutorOptions& options);

  // Runs one step: block copies, then the flattened batch; returns one SequenceResult per SequencePlan with
  // needs_token, in plan order. Plan errors (block id out of range, block table too short, token id >= V,
  // empty sequence, negative num_cached) are INVALID_ARGUMENT and leave the cache untouched. A failed
  // collective (lost peer, deadline) is returned as the communicator's error.
  StatusOr<StepResult> Execute(const StepPlan& plan);

  const ModelConfig& config() const { return model_->config(); }
  const ShardPlan& shard() const { return model_->shard(); }
  int64_t num_kv_blocks() const { return kv_pool_->num_blocks(); }  // pages
  DType kv_dtype() const { return kv_pool_->shape().dtype; }
  const KvLayout& kv_layout() const { return kv_layout_; }
  int block_size() const { return block_size_; }
  int64_t weight_bytes() const { return model_->weight_bytes(); }  // this rank's resident weight bytes
  // KvLayout::CapacityReport at the model's context length.
  std::string CapacityReport() const;

 private:
  ModelExecutor() = default;

  Communicator* comm_ = nullptr;
  int block_size_ = 16;
  std::unique_ptr<LlamaModel> model_;
  KvLayout kv_layout_;
  std::unique_ptr<KvPool> kv_pool_;
  std::vector<LayerKvCache> kv_caches_;  // [L]
  std::unique_ptr<ThreadPool> pool_;

  StepBatch batch_;            // the flattened step (rebuilt by every Execute)
  std::vector<float> logits_;  // [S_needing, V_shard]
};

}  // namespace tpserve
