// ShardPlan: which slice of every weight and of the KV cache one tensor-parallel rank owns.
//
// Query heads are split contiguously, per-rank counts differing by at most one, for any tp_size from 1
// to num_heads (divisors or not). A rank holds every KV head its query heads read (kv = q / (H / Hkv)),
// so a KV head is replicated on each rank whose query-head range touches its group. FFN columns are split
// in whole quantisation blocks of 32 (the last block may be partial when ffn_size is not a multiple of 32),
// vocabulary rows evenly with the remainder spread over the first ranks.
// The row-parallel weights (attn_output, ffn_down) are sliced by columns, and a quantised row only at
// its blocks: a K-quant's 256-value super-block shares its scales, so it is never split. The plan
// puts FFN boundaries on whole blocks of ffn_down's type, and head boundaries where attn_output's
// columns (head · D) fall on whole blocks: in groups of heads when D is smaller than the block.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "model/model_config.h"
#include "model/weight_source.h"

namespace tpserve {

// The column block of each row-parallel weight, from its stored type (DTypeBlockElems: 1 for float
// types, 32, 256 for K-quants), the largest over the layers.
struct RowParallelBlocks {
  int64_t attn_output = 1;
  int64_t ffn_down = 1;
  std::string attn_output_type = "F32";  // the type that sets each block, for error messages
  std::string ffn_down_type = "F32";
  // Of the blk.N.attn_output.weight and blk.N.ffn_down.weight tensors of `weights` (absent ones ignored).
  static RowParallelBlocks Of(const WeightSource& weights, int num_layers);
};

struct ShardPlan {
  int tp_rank = 0;
  int tp_size = 1;
  int head_dim = 0;  // D

  int head_begin = 0;  // this rank's query heads [head_begin, head_end) of num_heads
  int head_end = 0;
  int kv_head_begin = 0;  // the KV heads those query heads read [kv_head_begin, kv_head_end)
  int kv_head_end = 0;
  std::vector<int32_t> kv_head_of_q;  // [H] local KV head index read by each local query head

  int64_t ffn_begin = 0;  // FFN columns [ffn_begin, ffn_end) of ffn_size
  int64_t ffn_end = 0;
  int64_t vocab_begin = 0;  // vocabulary rows [vocab_begin, vocab_end) of vocab_size
  int64_t vocab_end = 0;

  // INVALID_ARGUMENT when tp_size is not in [1, num_heads] or tp_rank not in [0, tp_size), when the
  // heads cannot be split into tp_size ranges on attn_output's blocks (the message says which type
  // and block), or the config is inconsistent (num_kv_heads not dividing num_heads).
  static StatusOr<ShardPlan> Make(const ModelConfig& config, int tp_rank, int tp_size,
                                  const RowParallelBlocks& blocks = {});

  int num_heads() const { return head_end - head_begin; }           // H
  int num_kv_heads() const { return kv_head_end - kv_head_begin; }  // Hkv
  int64_t ffn_shard() const { return ffn_end - ffn_begin; }
  int64_t vocab_shard() const { return vocab_end - vocab_begin; }
  // Rows of attn_q / attn_k,attn_v and columns of attn_output this rank owns.
  int64_t q_row_begin() const { return int64_t{head_begin} * head_dim; }
  int64_t q_row_end() const { return int64_t{head_end} * head_dim; }
  int64_t kv_row_begin() const { return int64_t{kv_head_begin} * head_dim; }
  int64_t kv_row_end() const { return int64_t{kv_head_end} * head_dim; }

  std::string ToString() const;
};

// The even split of `n` items over `parts`: part p gets [begin, end), sizes differ by at most one, the
// larger parts first.
void SplitEvenly(int64_t n, int parts, int part, int64_t* begin, int64_t* end);

}  // namespace tpserve
