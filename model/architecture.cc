#include "model/architecture.h"

#include <array>

namespace tpserve {
namespace {

constexpr std::array<Architecture, 5> kArchitectures = [] {
  Architecture llama;
  llama.name = "llama";

  Architecture qwen2;
  qwen2.name = "qwen2";
  qwen2.rope_layout = RopeLayout::kHalf;
  qwen2.qkv_bias = true;

  Architecture qwen3;
  qwen3.name = "qwen3";
  qwen3.rope_layout = RopeLayout::kHalf;
  qwen3.qk_norm = true;

  Architecture phi3;
  phi3.name = "phi3";
  phi3.rope_layout = RopeLayout::kHalf;
  phi3.fused_qkv = true;
  phi3.fused_gate_up = true;

  Architecture gemma3;
  gemma3.name = "gemma3";
  gemma3.rope_layout = RopeLayout::kHalf;
  gemma3.qk_norm = true;
  gemma3.post_norms = true;
  gemma3.scale_embedding = true;
  gemma3.activation = Activation::kGeluTanh;
  gemma3.sliding_window_period = 6;
  gemma3.default_rope_theta_local = 10000.0f;
  return std::array<Architecture, 5>{llama, qwen2, qwen3, phi3, gemma3};
}();

}  // namespace

const Architecture* FindArchitecture(std::string_view name) {
  for (const Architecture& a : kArchitectures) {
    if (name == a.name) return &a;
  }
  return nullptr;
}

std::string SupportedArchitectures() {
  std::string out;
  for (const Architecture& a : kArchitectures) {
    if (!out.empty()) out += ", ";
    out += a.name;
  }
  return out;
}

}  // namespace tpserve
