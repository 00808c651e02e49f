#include "worker/layer_weights.h"

#include "common/check.h"

namespace tpserve {
namespace {

std::string BlockName(int layer, const char* what, const char* kind = "weight") {
  return "blk." + std::to_string(layer) + "." + what + "." + kind;
}

}  // namespace

LayerWeights PlanLayerWeights(const ModelConfig& config, const ShardPlan& shard, int l) {
  const Architecture& arch = config.arch();
  const int64_t q_rows = int64_t{config.num_heads} * config.head_dim;
  const int64_t kv_rows = int64_t{config.num_kv_heads} * config.head_dim;
  const int64_t ffn = config.ffn_size;
  LayerWeights w;
  w.attn_norm = BlockName(l, "attn_norm");
  if (arch.fused_qkv) {
    // One [Q; K; V] tensor: each part's rows sit at its offset, this rank's heads of each.
    const std::string name = BlockName(l, "attn_qkv");
    const int64_t total = q_rows + 2 * kv_rows;
    w.qkv = {{name, total, shard.q_row_begin(), shard.q_row_end()},
             {name, total, q_rows + shard.kv_row_begin(), q_rows + shard.kv_row_end()},
             {name, total, q_rows + kv_rows + shard.kv_row_begin(), q_rows + kv_rows + shard.kv_row_end()}};
  } else {
    w.qkv = {{BlockName(l, "attn_q"), q_rows, shard.q_row_begin(), shard.q_row_end()},
             {BlockName(l, "attn_k"), kv_rows, shard.kv_row_begin(), shard.kv_row_end()},
             {BlockName(l, "attn_v"), kv_rows, shard.kv_row_begin(), shard.kv_row_end()}};
    if (arch.qkv_bias) {
      w.qkv[0].bias = BlockName(l, "attn_q", "bias");
      w.qkv[1].bias = BlockName(l, "attn_k", "bias");
      w.qkv[2].bias = BlockName(l, "attn_v", "bias");
    }
  }
  if (arch.qk_norm) {
    w.q_norm = BlockName(l, "attn_q_norm");
    w.k_norm = BlockName(l, "attn_k_norm");
  }
  w.attn_output = BlockName(l, "attn_output");
  w.ffn_norm = BlockName(l, "ffn_norm");
  if (arch.fused_gate_up) {
    // One [gate; up] tensor named ffn_up: this rank's rows of each half.
    const std::string name = BlockName(l, "ffn_up");
    w.gate_up = {{name, 2 * ffn, shard.ffn_begin, shard.ffn_end},
                 {name, 2 * ffn, ffn + shard.ffn_begin, ffn + shard.ffn_end}};
  } else {
    w.gate_up = {{BlockName(l, "ffn_gate"), ffn, shard.ffn_begin, shard.ffn_end},
                 {BlockName(l, "ffn_up"), ffn, shard.ffn_begin, shard.ffn_end}};
  }
  w.ffn_down = BlockName(l, "ffn_down");
  if (arch.post_norms) {
    w.post_attn_norm = BlockName(l, "post_attention_norm");
    w.post_ffn_norm = BlockName(l, "post_ffw_norm");
  }
  w.inv_freq = config.RopeInverseFrequencies(l);
  CHECK_EQ(static_cast<int64_t>(w.inv_freq.size()), config.head_dim / 2);
  w.sliding_window = config.IsSlidingLayer(l) ? config.sliding_window : 0;
  return w;
}

}  // namespace tpserve
