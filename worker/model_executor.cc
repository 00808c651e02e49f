#include "worker/model_executor.h"

#include <algorithm>
#include <chrono>
#include <string>

#include "common/logging.h"
#include "kvstore/slot_mapping.h"
#include "model/model_file.h"
#include "worker/sampler.h"

namespace tpserve {
namespace {

// All ranks' logits for `num_rows` rows, gathered into full rows: out [num_rows, V].
// Vocabulary shards differ by at most one row, so each rank sends its shard padded to the largest.
Status GatherLogits(const float* shard_logits, int64_t num_rows, int64_t vocab_size, int64_t vocab_shard,
                    Communicator& comm, std::vector<float>* out) {
  const int tp_size = comm.size();
  int64_t begin = 0, end = 0;
  SplitEvenly(vocab_size, tp_size, 0, &begin, &end);
  const int64_t padded = end - begin;  // the first shard is the largest
  std::vector<float> send(num_rows * padded, 0.0f);  // [num_rows, padded]
  for (int64_t r = 0; r < num_rows; ++r) {
    std::copy(shard_logits + r * vocab_shard, shard_logits + (r + 1) * vocab_shard, send.data() + r * padded);
  }
  std::vector<float> gathered(static_cast<size_t>(tp_size) * num_rows * padded);  // [tp, num_rows, padded]
  RETURN_IF_ERROR(comm.AllGather(send.data(), send.size(), gathered.data()));
  out->assign(num_rows * vocab_size, 0.0f);
  for (int rank = 0; rank < tp_size; ++rank) {
    SplitEvenly(vocab_size, tp_size, rank, &begin, &end);
    for (int64_t r = 0; r < num_rows; ++r) {
      const float* src = gathered.data() + (rank * num_rows + r) * padded;
      std::copy(src, src + (end - begin), out->data() + r * vocab_size + begin);
    }
  }
  return OkStatus();
}

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

StatusOr<std::unique_ptr<ModelExecutor>> ModelExecutor::Create(const ModelFile& model, Communicator* comm,
                                                               const ExecutorOptions& options) {
  return Create(model.config(), model.weights(), comm, options);
}

StatusOr<std::unique_ptr<ModelExecutor>> ModelExecutor::Create(const ModelConfig& config,
                                                               const WeightSource& weights, Communicator* comm,
                                                               const ExecutorOptions& options) {
  CHECK(comm != nullptr);
  if (comm->rank() != options.tp_rank || comm->size() != options.tp_size) {
    return InvalidArgument("communicator is rank " + std::to_string(comm->rank()) + " of " +
                           std::to_string(comm->size()) + " but the options say rank " +
                           std::to_string(options.tp_rank) + " of " + std::to_string(options.tp_size));
  }
  if (options.block_size < 1) return InvalidArgument("block size must be positive");
  ASSIGN_OR_RETURN(ShardPlan shard, ShardPlan::Make(config, options.tp_rank, options.tp_size));

  std::unique_ptr<ModelExecutor> executor(new ModelExecutor());
  executor->comm_ = comm;
  executor->block_size_ = options.block_size;
  ASSIGN_OR_RETURN(executor->model_, LlamaModel::Load(config, weights, shard, options.merge_column_parallel));

  int64_t num_blocks = options.num_kv_blocks;
  if (num_blocks <= 0) {
    num_blocks = KvPool::BlocksForBudget(options.kv_memory_bytes, config.num_layers, shard.num_kv_heads(),
                                         config.head_dim, options.block_size);
  }
  if (num_blocks <= 0) {
    return ResourceExhausted("KV memory budget of " + std::to_string(options.kv_memory_bytes) +
                             " bytes holds no block");
  }
  KvPoolShape kv_shape;
  kv_shape.num_layers = config.num_layers;
  kv_shape.num_kv_heads = shard.num_kv_heads();
  kv_shape.head_dim = config.head_dim;
  kv_shape.block_size = options.block_size;
  kv_shape.num_blocks = num_blocks;
  ASSIGN_OR_RETURN(executor->kv_pool_, KvPool::Create(kv_shape));
  for (int l = 0; l < config.num_layers; ++l) {
    executor->kv_caches_.push_back({executor->kv_pool_->KeyCache(l), executor->kv_pool_->ValueCache(l)});
  }
  const int num_threads = options.num_threads > 0 ? options.num_threads : ThreadPool::DefaultThreads();
  const int poll_us = options.poll_us >= 0 ? options.poll_us : ThreadPool::DefaultPollMicros();
  executor->pool_ = std::make_unique<ThreadPool>(num_threads, poll_us);
  LOG(INFO) << shard.ToString() << ": " << executor->weight_bytes() << " weight bytes, "
            << executor->CapacityReport() << ", " << num_threads << " threads polling " << poll_us << " us";
  return executor;
}

std::string ModelExecutor::CapacityReport() const { return kv_pool_->CapacityReport(config().context_length); }

Status ModelExecutor::ValidatePlan(const StepPlan& plan) const {
  const int64_t num_blocks = num_kv_blocks();
  for (const auto& [src, dst] : plan.block_copies) {
    if (src < 0 || src >= num_blocks || dst < 0 || dst >= num_blocks) {
      return InvalidArgument("block copy " + std::to_string(src) + " -> " + std::to_string(dst) + " outside the " +
                             std::to_string(num_blocks) + " KV blocks");
    }
  }
  const int vocab_size = config().vocab_size;
  for (const SequencePlan& seq : plan.sequences) {
    const std::string where = "sequence " + std::to_string(seq.seq_id) + ": ";
    if (seq.token_ids.empty()) return InvalidArgument(where + "no tokens");
    if (seq.num_cached < 0) return InvalidArgument(where + "negative num_cached");
    for (int32_t id : seq.token_ids) {
      if (id < 0 || id >= vocab_size) {
        return InvalidArgument(where + "token id " + std::to_string(id) + " outside the vocabulary of " +
                               std::to_string(vocab_size));
      }
    }
    if (seq.needs_token) {
      Status sampling = ValidateSamplingParams(seq.sampling, seq.penalty_tokens, vocab_size);
      if (!sampling.ok()) return InvalidArgument(where + sampling.message());
    }
    const int64_t num_positions = int64_t{seq.num_cached} + static_cast<int64_t>(seq.token_ids.size());
    const int64_t needed = CeilDiv(num_positions, block_size_);
    if (static_cast<int64_t>(seq.block_table.size()) < needed) {
      return InvalidArgument(where + "block table has " + std::to_string(seq.block_table.size()) +
                             " blocks, positions up to " + std::to_string(num_positions) + " need " +
                             std::to_string(needed));
    }
    for (int64_t b = 0; b < needed; ++b) {
      if (seq.block_table[b] < 0 || seq.block_table[b] >= num_blocks) {
        return InvalidArgument(where + "block id " + std::to_string(seq.block_table[b]) + " outside the " +
                               std::to_string(num_blocks) + " KV blocks");
      }
    }
  }
  return OkStatus();
}

Status ModelExecutor::Flatten(const StepPlan& plan) {
  token_ids_.clear();
  positions_.clear();
  token_seq_.clear();
  slot_mapping_.clear();
  logit_rows_.clear();
  sampled_seqs_.clear();
  max_blocks_per_seq_ = 1;
  for (const SequencePlan& seq : plan.sequences) {
    const int64_t num_positions = int64_t{seq.num_cached} + static_cast<int64_t>(seq.token_ids.size());
    max_blocks_per_seq_ = std::max(max_blocks_per_seq_, CeilDiv(num_positions, block_size_));
  }
  const int64_t num_seqs = static_cast<int64_t>(plan.sequences.size());
  block_tables_.assign(num_seqs * max_blocks_per_seq_, 0);  // padding is never read
  for (int64_t s = 0; s < num_seqs; ++s) {
    const SequencePlan& seq = plan.sequences[s];
    const int64_t n = static_cast<int64_t>(seq.token_ids.size());
    const int64_t needed = CeilDiv(seq.num_cached + n, block_size_);
    std::copy(seq.block_table.begin(), seq.block_table.begin() + needed, block_tables_.begin() + s * max_blocks_per_seq_);
    const size_t first = token_ids_.size();
    slot_mapping_.resize(first + n);
    RETURN_IF_ERROR(ComputeSlotMapping(seq.block_table, seq.num_cached, n, block_size_, slot_mapping_.data() + first,
                                       num_kv_blocks()));
    for (int64_t i = 0; i < n; ++i) {
      token_ids_.push_back(seq.token_ids[i]);
      positions_.push_back(static_cast<int32_t>(seq.num_cached + i));
      token_seq_.push_back(static_cast<int32_t>(s));
    }
    if (seq.needs_token) {
      logit_rows_.push_back(static_cast<int32_t>(token_ids_.size() - 1));
      sampled_seqs_.push_back(&seq);
    }
  }
  return OkStatus();
}

StatusOr<StepResult> ModelExecutor::Execute(const StepPlan& plan) {
  const auto start = std::chrono::steady_clock::now();
  const double collective_start = comm_->collective_seconds();
  RETURN_IF_ERROR(ValidatePlan(plan));
  RETURN_IF_ERROR(Flatten(plan));
  for (const auto& [src, dst] : plan.block_copies) RETURN_IF_ERROR(kv_pool_->CopyBlock(src, dst));

  StepResult result;
  result.step_id = plan.step_id;
  if (!token_ids_.empty()) {
    ForwardBatch batch;
    batch.token_ids = token_ids_.data();
    batch.positions = positions_.data();
    batch.token_seq = token_seq_.data();
    batch.slot_mapping = slot_mapping_.data();
    batch.block_tables = block_tables_.data();
    batch.logit_rows = logit_rows_.data();
    batch.num_tokens = static_cast<int64_t>(token_ids_.size());
    batch.max_blocks_per_seq = max_blocks_per_seq_;
    batch.num_logit_rows = static_cast<int64_t>(logit_rows_.size());
    batch.block_size = block_size_;
    logits_.resize(logit_rows_.size() * shard().vocab_shard());
    RETURN_IF_ERROR(model_->Forward(batch, kv_caches_, logits_.data(), pool_.get(), *comm_));
    ASSIGN_OR_RETURN(result.sequences, Sample(plan));
  }
  result.compute_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  result.allreduce_ms = (comm_->collective_seconds() - collective_start) * 1e3;
  return result;
}

StatusOr<std::vector<SequenceResult>> ModelExecutor::Sample(const StepPlan& plan) {
  const int64_t num_rows = static_cast<int64_t>(sampled_seqs_.size());
  const int64_t vocab_size = config().vocab_size;
  const int64_t vocab_shard = shard().vocab_shard();
  std::vector<float> full;  // [num_rows, V], only when needed
  const bool single_rank = comm_->size() == 1;
  ASSIGN_OR_RETURN(std::vector<SequenceResult> results,
                   SampleTokens(logits_.data(), num_rows, shard().vocab_begin, vocab_shard, vocab_size,
                                sampled_seqs_, *comm_));
  if (plan.return_logits) {
    if (single_rank) {
      full = logits_;
    } else {
      RETURN_IF_ERROR(GatherLogits(logits_.data(), num_rows, vocab_size, vocab_shard, *comm_, &full));
    }
  }
  if (plan.return_logits) {
    for (int64_t r = 0; r < num_rows; ++r) {
      results[r].logits.assign(full.begin() + r * vocab_size, full.begin() + (r + 1) * vocab_size);
    }
  }
  return results;
}

}  // namespace tpserve
