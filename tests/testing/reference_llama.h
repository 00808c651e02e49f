// ReferenceLlama: an independent float64 decoder forward pass written as plain loops, sharing no kernel
// code with the engine. It recomputes the whole sequence every call (no cache): the "training view".
// Supports GQA, both RoPE layouts, and the features of every supported architecture, each written here
// from the published model definitions rather than taken from model/architecture.h: Q/K/V biases
// (qwen2), per-head Q/K RMSNorm (qwen3, gemma3), fused QKV and gate/up tensors (phi3), post-attention
// and post-FFN norms, sqrt(hidden) embedding scale, GELU-tanh, 5-of-6 sliding layers with a local RoPE
// base (gemma3), a sliding window on every layer (llama/Mistral, phi3). RoPE frequency scaling is not
// supported (CHECKed off).
#pragma once

#include <cstdint>
#include <vector>

#include "common/status.h"
#include "model/model_config.h"
#include "model/weight_source.h"

namespace tpserve::testing {

class ReferenceLlama {
 public:
  // Dequantises every weight to float64 (through common's reference DequantizeRow).
  static StatusOr<ReferenceLlama> Load(const ModelConfig& config, const WeightSource& weights);

  // Logits [T, V] at every position of `tokens` (causal), in float64.
  std::vector<double> Forward(const std::vector<int32_t>& tokens) const;

  const ModelConfig& config() const { return config_; }

 private:
  struct Layer {
    std::vector<double> attn_norm, wq, wk, wv, wo, ffn_norm, gate, up, down;
    std::vector<double> bq, bk, bv;                     // empty without biases
    std::vector<double> q_norm, k_norm;                 // empty without per-head norms
    std::vector<double> post_attn_norm, post_ffn_norm;  // empty without post norms
    double rope_theta = 0;
    int64_t window = 0;  // 0: full attention
  };
  ModelConfig config_;
  bool gelu_ = false;
  double embedding_scale_ = 1;
  std::vector<double> embd_;  // [V, hidden]
  std::vector<Layer> layers_;
  std::vector<double> output_norm_;
  std::vector<double> output_;  // [V, hidden]
};

}  // namespace tpserve::testing
