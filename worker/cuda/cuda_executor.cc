#include "worker/cuda/cuda_executor.h"

#include <chrono>
#include <cstdint>
#include <cstdlib>

#include "comm/mpi_communicator.h"
#include "comm/nccl_communicator.h"
#include "common/logging.h"
#include "kvstore/kv_pool.h"
#include "model/model_file.h"
#include "worker/cuda/cuda_status.h"
#include "worker/group_launch.h"
#include "worker/step_sampling.h"

namespace tpserve {
namespace {

// This process's index among the job's ranks on its host (0 outside mpirun).
int LocalRankOnHost() {
  const char* local = std::getenv("OMPI_COMM_WORLD_LOCAL_RANK");
  return local != nullptr ? std::max(0, std::atoi(local)) : 0;
}

// Makes this rank's GPU current and returns its ordinal.
StatusOr<int> SelectDevice(int tp_size) {
  int count = 0;
  const cudaError_t rc = cudaGetDeviceCount(&count);
  if (rc != cudaSuccess || count == 0) {
    return FailedPrecondition(std::string("--device cuda: no CUDA device is visible (cudaGetDeviceCount: ") +
                              (rc == cudaSuccess ? "0 devices" : cudaGetErrorString(rc)) + ")");
  }
  const int local_ranks = LocalRanksOnHost();
  if (tp_size > 1 && local_ranks > count) {
    return FailedPrecondition(std::to_string(local_ranks) + " ranks of this TP group run on this host but only " +
                              std::to_string(count) + " CUDA device(s) are visible: NCCL needs one GPU per rank");
  }
  const int device = LocalRankOnHost() % count;
  CUDA_RETURN_IF_ERROR(cudaSetDevice(device));
  // The matmuls' stream-ordered scratch (cudaMallocAsync) stays in the pool between steps instead of
  // going back to the driver at every synchronisation.
  cudaMemPool_t pool;
  CUDA_RETURN_IF_ERROR(cudaDeviceGetDefaultMemPool(&pool, device));
  uint64_t keep_all = UINT64_MAX;
  CUDA_RETURN_IF_ERROR(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep_all));
  return device;
}

}  // namespace

StatusOr<std::unique_ptr<CudaExecutor>> CudaExecutor::Create(const ModelFile& model, Communicator* comm,
                                                             const ExecutorOptions& options) {
  return Create(model.config(), model.weights(), comm, options);
}

StatusOr<std::unique_ptr<CudaExecutor>> CudaExecutor::Create(const ModelConfig& config, const WeightSource& weights,
                                                             Communicator* comm, const ExecutorOptions& options) {
  CHECK(comm != nullptr);
  ASSIGN_OR_RETURN(ShardPlan shard, PlanExecutorShard(config, weights, *comm, options));

  RETURN_IF_ERROR(KvPool::CheckType(config.head_dim, options.kv_dtype));
  if (ExecutorKvLayout(config, options).num_groups() > 1) {
    return Unimplemented("the CUDA executor keeps every layer's KV pages (free_sliding_kv / --sliding-kv free is CPU "
                         "only)");
  }
  std::unique_ptr<CudaExecutor> executor(new CudaExecutor());
  executor->host_comm_ = comm;
  executor->block_size_ = options.block_size;
  ASSIGN_OR_RETURN(executor->device_, SelectDevice(options.tp_size));
  cudaDeviceProp prop;
  CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&prop, executor->device_));
  executor->device_name_ = prop.name;
  CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&executor->stream_, cudaStreamNonBlocking));
  CUBLAS_RETURN_IF_ERROR(cublasCreate(&executor->cublas_));
  CUBLAS_RETURN_IF_ERROR(cublasSetStream(executor->cublas_, executor->stream_));

  if (options.tp_size == 1) {
    executor->device_comm_ = MakeLocalCommunicator();
  } else {
    auto* bootstrap = dynamic_cast<MpiCommunicator*>(comm);
    if (bootstrap == nullptr) {
      return InvalidArgument("the CUDA executor at TP " + std::to_string(options.tp_size) +
                             " needs an MPI communicator to bootstrap NCCL");
    }
    NcclCommunicatorOptions nccl;
    nccl.deadline = bootstrap->options().deadline;
    nccl.wait = bootstrap->options().wait;
    ASSIGN_OR_RETURN(executor->device_comm_, NcclCommunicator::Create(bootstrap, executor->stream_, nccl));
  }

  ASSIGN_OR_RETURN(executor->model_, CudaLlamaModel::Load(config, weights, shard));

  int64_t num_blocks = options.num_kv_blocks;
  if (num_blocks <= 0) {
    num_blocks = KvPool::BlocksForBudget(options.kv_memory_bytes, config.num_layers, shard.num_kv_heads(),
                                         config.head_dim, options.block_size, options.kv_dtype);
  }
  if (num_blocks <= 0) {
    return ResourceExhausted("KV memory budget of " + std::to_string(options.kv_memory_bytes) +
                             " bytes holds no block");
  }
  executor->num_kv_blocks_ = num_blocks;
  executor->kv_block_bytes_ =
      int64_t{options.block_size} * shard.num_kv_heads() * KvPool::RowBytes(config.head_dim, options.kv_dtype);
  const int64_t layer_bytes = num_blocks * executor->kv_block_bytes_;  // one layer's K (or V)
  ASSIGN_OR_RETURN(executor->kv_,
                   DeviceBuffer::Allocate(static_cast<size_t>(2 * config.num_layers * layer_bytes), "KV cache"));
  // On our stream: a non-blocking stream is not ordered after the legacy stream's cudaMemset.
  CUDA_RETURN_IF_ERROR(cudaMemsetAsync(executor->kv_.get(), 0, executor->kv_.bytes(), executor->stream_));
  for (int l = 0; l < config.num_layers; ++l) {
    uint8_t* layer = executor->kv_.as<uint8_t>() + 2 * l * layer_bytes;
    executor->kv_layers_.push_back({layer, layer + layer_bytes, options.kv_dtype});
  }
  // The weight uploads (cudaMemcpy on the legacy stream, which our non-blocking stream does not wait
  // for) and the KV zeroing are done before the first step; a fault while loading surfaces here.
  CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());
  LOG(INFO) << shard.ToString() << " on GPU " << executor->device_ << " (" << executor->device_name_
            << "): " << executor->weight_bytes() << " device weight bytes, " << executor->CapacityReport();
  return executor;
}

CudaExecutor::~CudaExecutor() {
  if (stream_ != nullptr) cudaStreamSynchronize(stream_);
  device_comm_.reset();  // NCCL first: it runs on our stream
  model_.reset();
  if (cublas_ != nullptr) cublasDestroy(cublas_);
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

std::string CudaExecutor::CapacityReport() const {
  const double mib = static_cast<double>(kv_.bytes()) / (1 << 20);
  const char* dtype = kv_layers_.empty() ? "F32" : DTypeName(kv_layers_.front().dtype);
  return std::to_string(num_kv_blocks_) + " KV blocks = " + std::to_string(num_kv_blocks_ * block_size_) +
         " tokens of " + dtype + " KV (" + std::to_string(static_cast<int64_t>(mib)) + " MiB of device memory) on " +
         device_name_;
}

Status CudaExecutor::UploadStep() {
  const StepBatch& b = batch_;
  step_host_.clear();
  const std::vector<int32_t>* parts[] = {&b.token_ids,    &b.positions,    &b.token_seq,
                                         &b.slot_mapping, &b.block_tables, &b.logit_rows};
  size_t offsets[6];
  for (int i = 0; i < 6; ++i) {
    offsets[i] = step_host_.size();
    step_host_.insert(step_host_.end(), parts[i]->begin(), parts[i]->end());
  }
  const size_t bytes = step_host_.size() * sizeof(int32_t);
  if (bytes > step_device_.bytes()) RETURN_IF_ERROR(step_device_.Reserve(2 * bytes, "step arrays"));
  CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(step_device_.get(), step_host_.data(), bytes, cudaMemcpyHostToDevice, stream_));
  const int32_t* base = step_device_.as<int32_t>();
  step_.token_ids = base + offsets[0];
  step_.positions = base + offsets[1];
  step_.token_seq = base + offsets[2];
  step_.slot_mapping = base + offsets[3];
  step_.block_tables = base + offsets[4];
  step_.logit_rows = base + offsets[5];
  step_.num_tokens = b.num_tokens();
  step_.max_blocks_per_seq = b.max_blocks_per_seq;
  step_.num_logit_rows = b.num_logit_rows();
  step_.block_size = block_size_;
  return OkStatus();
}

StatusOr<StepResult> CudaExecutor::Execute(const StepPlan& plan) {
  const auto start = std::chrono::steady_clock::now();
  const double collective_start = device_comm_->collective_seconds() + host_comm_->collective_seconds();
  RETURN_IF_ERROR(ValidateStepPlan(plan, num_kv_blocks_, block_size_, config().vocab_size));
  RETURN_IF_ERROR(FlattenStepPlan(plan, block_size_, num_kv_blocks_, &batch_));
  const size_t block_bytes = static_cast<size_t>(kv_block_bytes_);
  for (const auto& [src, dst] : plan.block_copies) {
    for (const DeviceLayerKv& layer : kv_layers_) {
      for (void* kv : {layer.k, layer.v}) {
        auto* cache = static_cast<uint8_t*>(kv);
        CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(cache + dst * kv_block_bytes_, cache + src * kv_block_bytes_,
                                             block_bytes, cudaMemcpyDeviceToDevice, stream_));
      }
    }
  }

  StepResult result;
  result.step_id = plan.step_id;
  if (batch_.num_tokens() > 0) {
    RETURN_IF_ERROR(UploadStep());
    const int64_t logit_floats = batch_.num_logit_rows() * shard().vocab_shard();
    RETURN_IF_ERROR(logits_device_.Reserve(static_cast<size_t>(logit_floats) * sizeof(float), "logits"));
    RETURN_IF_ERROR(model_->Forward(step_, kv_layers_, logits_device_.as<float>(), stream_, cublas_, *device_comm_));
    logits_.resize(logit_floats);
    CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(logits_.data(), logits_device_.get(), logit_floats * sizeof(float),
                                         cudaMemcpyDeviceToHost, stream_));
    CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
    RETURN_IF_ERROR(SampleStep(logits_.data(), batch_, shard(), config().vocab_size, plan.return_logits, *host_comm_,
                               &result));
  } else {
    CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));  // the block copies
  }
  result.compute_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  result.allreduce_ms =
      (device_comm_->collective_seconds() + host_comm_->collective_seconds() - collective_start) * 1e3;
  return result;
}

}  // namespace tpserve
