#include "model/type_mix.h"

#include <algorithm>
#include <cctype>

namespace tpserve {
namespace {

// llama.cpp's use_more_bits: the first and last eighth of the layers and every third one between.
bool UseMoreBits(int layer, int num_layers) {
  return layer < num_layers / 8 || layer >= 7 * num_layers / 8 || (layer - num_layers / 8) % 3 == 2;
}

// The layer of "blk.N.<name>", or -1.
int LayerOf(const std::string& name) {
  if (name.rfind("blk.", 0) != 0) return -1;
  return std::atoi(name.c_str() + 4);
}

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

bool TypeMix::Parse(const std::string& name, TypeMix* out) {
  std::string lower = name;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  if (lower == "q4_k_m" || lower == "q5_k_m") {
    *out = TypeMix{lower == "q4_k_m" ? DType::kQ4_K : DType::kQ5_K, true};
    return true;
  }
  TypeMix mix;
  if (!ParseDType(name, &mix.base)) return false;
  *out = mix;
  return true;
}

std::string TypeMix::Name() const { return std::string(DTypeName(base)) + (medium ? "_M" : ""); }

DType TypeMix::TensorType(const std::string& gguf_name, int64_t cols, int num_layers) const {
  DType type = base;
  if (medium) {
    const int layer = LayerOf(gguf_name);
    const bool more_bits = (EndsWith(gguf_name, ".attn_v.weight") || EndsWith(gguf_name, ".ffn_down.weight")) &&
                           layer >= 0 && UseMoreBits(layer, num_layers);
    if (gguf_name == "output.weight" || more_bits) type = DType::kQ6_K;
  }
  if (IsKQuant(type) && cols % kSuperBlock != 0) {
    switch (type) {
      case DType::kQ4_K: return DType::kQ5_0;
      case DType::kQ5_K: return DType::kQ5_1;
      case DType::kQ6_K: return DType::kQ8_0;
      default: return DType::kQ4_0;  // Q2_K, Q3_K
    }
  }
  return type;
}

}  // namespace tpserve
