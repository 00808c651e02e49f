// ReferenceLlama: an independent float64 Llama forward pass written as plain loops, sharing no kernel
// code with the engine. It recomputes the whole sequence every call (no cache): the "training view".
// Supports GQA and both RoPE layouts; RoPE frequency scaling is not supported (CHECKed off).
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
  };
  ModelConfig config_;
  std::vector<double> embd_;  // [V, hidden]
  std::vector<Layer> layers_;
  std::vector<double> output_norm_;
  std::vector<double> output_;  // [V, hidden]
};

}  // namespace tpserve::testing
