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
  const int group = config.num_heads / config.num_kv_heads;  // query heads per kv head
  // Rank r's query heads, and the KV heads they read.
  auto heads_of = [&](int r, int* q_begin, int* q_end, int* kv_begin, int* kv_end) {
    int64_t begin = 0, end = 0;
    SplitEvenly(num_groups, tp_size, r, &begin, &end);
    *q_begin = static_cast<int>(begin * head_group);
    *q_end = static_cast<int>(end * head_group);
    *kv_begin = *q_begin / group;
    *kv_end = (*q_end - 1) / group + 1;
  };
  heads_of(tp_rank, &plan.head_begin, &plan.head_end, &plan.kv_head_begin, &plan.kv_head_end);
  for (int q = plan.head_begin; q < plan.head_end; ++q) plan.kv_head_of_q.push_back(q / group - plan.kv_head_begin);

  // FFN: whole blocks of ffn_down (at least 32 columns), the last one possibly partial (float types),
  // placed so that every rank holds about the same weights: a rank's attention is 2·D values per hidden
  // unit for each query head (attn_q rows, attn_output columns) and each KV head (attn_k, attn_v rows),
  // an FFN column 3 (gate, up, down). Rank r ends at the block nearest the ideal cumulative FFN share.
  const int64_t ffn_unit = std::max<int64_t>(kQuantBlock, blocks.ffn_down);
  const int64_t ffn_blocks = (int64_t{config.ffn_size} + ffn_unit - 1) / ffn_unit;
  std::vector<int64_t> attention(tp_size);
  int64_t total = 3 * int64_t{config.ffn_size};
  for (int r = 0; r < tp_size; ++r) {
    int q_begin = 0, q_end = 0, kv_begin = 0, kv_end = 0;
    heads_of(r, &q_begin, &q_end, &kv_begin, &kv_end);
    attention[r] = 2 * int64_t{config.head_dim} * ((q_end - q_begin) + (kv_end - kv_begin));
    total += attention[r];
  }
  // The block that ends rank r's FFN range: the ideal cumulative share Σ_{i≤r} (total/tp − attention_i) / 3
  // columns, to the nearest block, never before the previous rank's end; the last rank ends at the last block.
  auto ffn_end_block = [&](int r) {
    if (r < 0) return int64_t{0};
    if (r == tp_size - 1) return ffn_blocks;
    int64_t owed = 0;  // 3 · tp · (columns up to rank r's end)
    for (int i = 0; i <= r; ++i) owed += total - tp_size * attention[i];
    const int64_t per_block = 3 * int64_t{tp_size} * ffn_unit;
    const int64_t nearest = owed <= 0 ? 0 : (owed + per_block / 2) / per_block;
    return std::min(ffn_blocks, nearest);
  };
  int64_t end_block = 0, begin_block = 0;
  for (int r = 0; r <= tp_rank; ++r) {
    begin_block = end_block;
    end_block = std::max(begin_block, ffn_end_block(r));
  }
  plan.ffn_begin = std::min<int64_t>(begin_block * ffn_unit, config.ffn_size);
  plan.ffn_end = std::min<int64_t>(end_block * ffn_unit, config.ffn_size);

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
