// Which stored type each weight matrix of a written file gets, chosen as llama.cpp's llama-quantize
// chooses: one base type, a K-quant falling back to a 32-value type on a matrix whose rows are not
// whole 256-value super-blocks (Q4_K → Q5_0, Q5_K → Q5_1, Q6_K → Q8_0, Q2_K and Q3_K → Q4_0; llama.cpp
// picks IQ4_NL for the last two, which tpserve does not read), and the "medium" mixes Q4_K_M / Q5_K_M:
// Q6_K for output.weight and for attn_v / ffn_down in the layers llama.cpp gives more bits.
// So a synthetic Q4_K_M file mixes the same types a downloaded one does.
#pragma once

#include <cstdint>
#include <string>

#include "common/dtype.h"

namespace tpserve {

struct TypeMix {
  DType base = DType::kF32;
  bool medium = false;  // "_M": with base Q4_K or Q5_K

  // Parses a type name (ParseDType's) or "q4_k_m" / "q5_k_m" (case-insensitive). False if unknown.
  static bool Parse(const std::string& name, TypeMix* out);
  std::string Name() const;  // "Q4_K_M", or the base type's name
  // The type of matrix `gguf_name` ("blk.3.attn_v.weight", "output.weight", ...) with rows of `cols`.
  DType TensorType(const std::string& gguf_name, int64_t cols, int num_layers) const;
};

}  // namespace tpserve
