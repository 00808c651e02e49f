#include "worker/shard_plan.h"

#include <algorithm>
#include <numeric>
#include <tuple>
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

RowParallelBlocks RowParallelBlocks::Of(const WeightSource& weights, int num_layers) {
  RowParallelBlocks blocks;
  for (int l = 0; l < num_layers; ++l) {
    for (auto [name, block, type] : {std::tuple{"attn_output", &blocks.attn_output, &blocks.attn_output_type},
                                     std::tuple{"ffn_down", &blocks.ffn_down, &blocks.ffn_down_type}}) {
      const TensorInfo* info = weights.Find("blk." + std::to_string(l) + "." + name + ".weight");
      if (info != nullptr && DTypeBlockElems(info->type) > *block) {
        *block = DTypeBlockElems(info->type);
        *type = DTypeName(info->type);
      }
    }
  }
  return blocks;
}

StatusOr<ShardPlan> ShardPlan::Make(const ModelConfig& config, int tp_rank, int tp_size,
                                    const RowParallelBlocks& blocks) {
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

  // Heads in groups whose attn_output columns fill whole blocks (1 head unless D < the block).
  const int64_t head_group = blocks.attn_output / std::gcd<int64_t>(blocks.attn_output, config.head_dim);
  const int64_t num_groups = config.num_heads / head_group;
  if (config.num_heads % head_group != 0 || tp_size > num_groups) {
    return InvalidArgument("tensor-parallel size " + std::to_string(tp_size) + ": attn_output is " +
                           blocks.attn_output_type + ", whose rows can be sliced only at its " +
                           std::to_string(blocks.attn_output) + "-value blocks, i.e. every " +
                           std::to_string(head_group) + " heads of " + std::to_string(config.head_dim) +
                           "; the " + std::to_string(config.num_heads) + " heads allow at most " +
                           std::to_string(num_groups) + " ranks");
  }
  int64_t begin = 0, end = 0;
  SplitEvenly(num_groups, tp_size, tp_rank, &begin, &end);
  plan.head_begin = static_cast<int>(begin * head_group);
  plan.head_end = static_cast<int>(end * head_group);
  const int group = config.num_heads / config.num_kv_heads;  // query heads per kv head
  plan.kv_head_begin = plan.head_begin / group;
  plan.kv_head_end = (plan.head_end - 1) / group + 1;
  for (int q = plan.head_begin; q < plan.head_end; ++q) plan.kv_head_of_q.push_back(q / group - plan.kv_head_begin);

  // FFN: whole blocks of ffn_down (at least 32 columns), the last one possibly partial (float types).
  const int64_t ffn_unit = std::max<int64_t>(kQuantBlock, blocks.ffn_down);
  const int64_t ffn_blocks = (int64_t{config.ffn_size} + ffn_unit - 1) / ffn_unit;
  SplitEvenly(ffn_blocks, tp_size, tp_rank, &begin, &end);
  plan.ffn_begin = std::min<int64_t>(begin * ffn_unit, config.ffn_size);
  plan.ffn_end = std::min<int64_t>(end * ffn_unit, config.ffn_size);

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
