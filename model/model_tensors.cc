#include "model/model_tensors.h"

namespace tpserve {

std::vector<ModelTensor> ModelTensors(const ModelConfig& c) {
  const Architecture& arch = c.arch();
  const int64_t h = c.hidden_size, d = c.head_dim, f = c.ffn_size, vocab = c.vocab_size;
  const int64_t q = int64_t{c.num_heads} * d, kv = int64_t{c.num_kv_heads} * d;
  std::vector<ModelTensor> t = {{"token_embd.weight", {vocab, h}}};
  for (int l = 0; l < c.num_layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    t.push_back({p + "attn_norm.weight", {h}});
    if (arch.fused_qkv) {
      t.push_back({p + "attn_qkv.weight", {q + 2 * kv, h}});
    } else {
      t.push_back({p + "attn_q.weight", {q, h}});
      t.push_back({p + "attn_k.weight", {kv, h}});
      t.push_back({p + "attn_v.weight", {kv, h}});
    }
    if (arch.qkv_bias) {
      t.push_back({p + "attn_q.bias", {q}});
      t.push_back({p + "attn_k.bias", {kv}});
      t.push_back({p + "attn_v.bias", {kv}});
    }
    if (arch.qk_norm) {
      t.push_back({p + "attn_q_norm.weight", {d}});
      t.push_back({p + "attn_k_norm.weight", {d}});
    }
    t.push_back({p + "attn_output.weight", {h, q}});
    if (arch.post_norms) t.push_back({p + "post_attention_norm.weight", {h}});
    t.push_back({p + "ffn_norm.weight", {h}});
    if (arch.fused_gate_up) {
      t.push_back({p + "ffn_up.weight", {2 * f, h}});
    } else {
      t.push_back({p + "ffn_gate.weight", {f, h}});
      t.push_back({p + "ffn_up.weight", {f, h}});
    }
    t.push_back({p + "ffn_down.weight", {h, f}});
    if (arch.post_norms) t.push_back({p + "post_ffw_norm.weight", {h}});
  }
  t.push_back({"output_norm.weight", {h}});
  if (!c.tied_embeddings) t.push_back({"output.weight", {vocab, h}});
  return t;
}

}  // namespace tpserve
