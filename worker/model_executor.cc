#include "worker/model_executor.h"

#include <algorithm>
#include <chrono>
#include <string>

#include "common/logging.h"
#include "model/model_file.h"
#include "worker/step_sampling.h"

namespace tpserve {

StatusOr<ShardPlan> PlanExecutorShard(const ModelConfig& config, const WeightSource& weights,
                                      const Communicator& comm, const ExecutorOptions& options) {
  if (comm.rank() != options.tp_rank || comm.size() != options.tp_size) {
    return InvalidArgument("communicator is rank " + std::to_string(comm.rank()) + " of " +
                           std::to_string(comm.size()) + " but the options say rank " +
                           std::to_string(options.tp_rank) + " of " + std::to_string(options.tp_size));
  }
  if (options.block_size < 1) return InvalidArgument("block size must be positive");
  return ShardPlan::Make(config, options.tp_rank, options.tp_size,
                         RowParallelBlocks::Of(weights, config.num_layers));
}

StatusOr<std::unique_ptr<ModelExecutor>> ModelExecutor::Create(const ModelFile& model, Communicator* comm,
                                                               const ExecutorOptions& options) {
  return Create(model.config(), model.weights(), comm, options);
}

StatusOr<std::unique_ptr<ModelExecutor>> ModelExecutor::Create(const ModelConfig& config,
                                                               const WeightSource& weights, Communicator* comm,
                                                               const ExecutorOptions& options) {
  CHECK(comm != nullptr);
  ASSIGN_OR_RETURN(ShardPlan shard, PlanExecutorShard(config, weights, *comm, options));

  std::unique_ptr<ModelExecutor> executor(new ModelExecutor());
  executor->comm_ = comm;
  executor->block_size_ = options.block_size;
  ASSIGN_OR_RETURN(executor->model_, LlamaModel::Load(config, weights, shard, options.merge_column_parallel));

  executor->kv_layout_ = ExecutorKvLayout(config, options);
  const int64_t page_layers = executor->kv_layout_.layers_per_page;
  RETURN_IF_ERROR(KvPool::CheckType(config.head_dim, options.kv_dtype));
  int64_t num_blocks = options.num_kv_blocks;
  if (num_blocks <= 0) {
    num_blocks = KvPool::BlocksForBudget(options.kv_memory_bytes, page_layers, shard.num_kv_heads(), config.head_dim,
                                         options.block_size, options.kv_dtype);
  }
  if (num_blocks <= 0) {
    return ResourceExhausted("KV memory budget of " + std::to_string(options.kv_memory_bytes) +
                             " bytes holds no block");
  }
  KvPoolShape kv_shape;
  kv_shape.num_layers = page_layers;
  kv_shape.num_kv_heads = shard.num_kv_heads();
  kv_shape.head_dim = config.head_dim;
  kv_shape.block_size = options.block_size;
  kv_shape.num_blocks = num_blocks;
  kv_shape.dtype = options.kv_dtype;
  ASSIGN_OR_RETURN(executor->kv_pool_, KvPool::Create(kv_shape));
  for (int l = 0; l < config.num_layers; ++l) {
    const int slot = executor->kv_layout_.layer_slot[l];
    executor->kv_caches_.push_back({executor->kv_pool_->KeyCache(slot), executor->kv_pool_->ValueCache(slot),
                                    executor->kv_layout_.layer_group[l], options.kv_dtype});
  }
  const int num_threads = options.num_threads > 0 ? options.num_threads : ThreadPool::DefaultThreads();
  const int poll_us = options.poll_us >= 0 ? options.poll_us : ThreadPool::DefaultPollMicros();
  executor->pool_ = std::make_unique<ThreadPool>(num_threads, poll_us);
  LOG(INFO) << shard.ToString() << ": " << executor->weight_bytes() << " weight bytes, "
            << executor->CapacityReport() << ", " << num_threads << " threads polling " << poll_us << " us";
  return executor;
}

KvLayout ExecutorKvLayout(const ModelConfig& config, const ExecutorOptions& options) {
  if (!options.free_sliding_kv) return KvLayout::Shared(config.num_layers);
  std::vector<bool> sliding(config.num_layers);
  for (int l = 0; l < config.num_layers; ++l) sliding[l] = config.IsSlidingLayer(l);
  return KvLayout::Windowed(sliding, config.sliding_window);
}

std::string ModelExecutor::CapacityReport() const {
  return std::string("KV ") + DTypeName(kv_dtype()) + " " + std::to_string(kv_pool_->total_bytes() >> 20) + " MiB: " +
         kv_layout_.CapacityReport(kv_pool_->num_blocks(), block_size_, config().context_length);
}

StatusOr<StepResult> ModelExecutor::Execute(const StepPlan& plan) {
  const auto start = std::chrono::steady_clock::now();
  const double collective_start = comm_->collective_seconds();
  RETURN_IF_ERROR(ValidateStepPlan(plan, num_kv_blocks(), block_size_, config().vocab_size, kv_layout_.groups));
  RETURN_IF_ERROR(FlattenStepPlan(plan, block_size_, num_kv_blocks(), &batch_, kv_layout_.groups));
  for (const auto& [src, dst] : plan.block_copies) RETURN_IF_ERROR(kv_pool_->CopyBlock(src, dst));

  StepResult result;
  result.step_id = plan.step_id;
  if (batch_.num_tokens() > 0) {
    ForwardBatch batch;
    batch.token_ids = batch_.token_ids.data();
    batch.positions = batch_.positions.data();
    batch.token_seq = batch_.token_seq.data();
    batch.slot_mapping = batch_.slot_mapping.data();
    batch.block_tables = batch_.block_tables.data();
    batch.num_seqs = static_cast<int64_t>(plan.sequences.size());
    batch.logit_rows = batch_.logit_rows.data();
    batch.num_tokens = batch_.num_tokens();
    batch.max_blocks_per_seq = batch_.max_blocks_per_seq;
    batch.num_logit_rows = batch_.num_logit_rows();
    batch.block_size = block_size_;
    logits_.resize(batch_.num_logit_rows() * shard().vocab_shard());
    RETURN_IF_ERROR(model_->Forward(batch, kv_caches_, logits_.data(), pool_.get(), *comm_));
    RETURN_IF_ERROR(SampleStep(logits_.data(), batch_, shard(), config().vocab_size, plan.return_logits, *comm_,
                               &result));
  }
  result.compute_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  result.allreduce_ms = (comm_->collective_seconds() - collective_start) * 1e3;
  return result;
}

}  // namespace tpserve
