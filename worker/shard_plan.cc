#include "worker/shard_plan.h"

#include <algorithm>
#include <sstream>

#include "common/dtype.h"

namespace tpserve {

void SplitEvenly(int64_t n, int parts, int part, int64_t* begin, int64_t* end) {
  CHECK_GE(parts, 1);
  CHECK(part >= 0 && part < parts) << part << " of " << parts;
  const int64_t base = n / parts;
  const int64_t rem = n % parts;
  *begin = part * base + std::min<int64_t>(part, rem);
  *end = *begin + base + (part < rem ? 1 : 0);
}

StatusOr<ShardPlan> ShardPlan::Make(const ModelConfig& config, int tp_rank, int tp_size) {
  if (config.num_heads <= 0 || config.num_kv_heads <= 0 || config.num_heads % config.num_kv_heads != 0) {
    return InvalidArgument("model has " + std::to_string(config.num_heads) + " query heads and " +
                           std::to_string(config.num_kv_heads) + " kv heads; kv heads must divide query heads");
  }
  if (tp_size < 1 || tp_size > config.num_heads) {
    return InvalidArgument("tensor-parallel size " + std::to_string(tp_size) + " must be in [1, " +
                           std::to_string(config.num_heads) + "] (the number of query heads)");
  }
  if (tp_rank < 0 || tp_rank >= tp_size) {
    return InvalidArgument("tp rank " + std::to_string(tp_rank) + " outside [0, " + std::to_string(tp_size) + ")");
  }
  ShardPlan plan;
  plan.tp_rank = tp_rank;
  plan.tp_size = tp_size;
  plan.head_dim = config.head_dim;

  int64_t begin = 0, end = 0;
  SplitEvenly(config.num_heads, tp_size, tp_rank, &begin, &end);
  plan.head_begin = static_cast<int>(begin);
  plan.head_end = static_cast<int>(end);
  const int group = config.num_heads / config.num_kv_heads;  // query heads per kv head
  plan.kv_head_begin = plan.head_begin / group;
  plan.kv_head_end = (plan.head_end - 1) / group + 1;
  for (int q = plan.head_begin; q < plan.head_end; ++q) plan.kv_head_of_q.push_back(q / group - plan.kv_head_begin);

  // FFN: whole quantisation blocks, the last one possibly partial.
  const int64_t ffn_blocks = (int64_t{config.ffn_size} + kQuantBlock - 1) / kQuantBlock;
  SplitEvenly(ffn_blocks, tp_size, tp_rank, &begin, &end);
  plan.ffn_begin = std::min<int64_t>(begin * kQuantBlock, config.ffn_size);
  plan.ffn_end = std::min<int64_t>(end * kQuantBlock, config.ffn_size);

  SplitEvenly(config.vocab_size, tp_size, tp_rank, &plan.vocab_begin, &plan.vocab_end);
  return plan;
}

std::string ShardPlan::ToString() const {
  std::ostringstream out;
  out << "rank " << tp_rank << "/" << tp_size << ": heads [" << head_begin << "," << head_end << ") kv heads ["
      << kv_head_begin << "," << kv_head_end << ") ffn [" << ffn_begin << "," << ffn_end << ") vocab ["
      << vocab_begin << "," << vocab_end << ")";
  return out.str();
}

}  // namespace tpserve
