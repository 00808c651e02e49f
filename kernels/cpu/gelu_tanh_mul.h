#pragma once

#include <cstdint>

namespace tpserve {

// out[i] = gelu_tanh(gate[i]) * up[i], gelu_tanh(g) = g/2 · (1 + tanh(√(2/π) (g + 0.044715 g³))) (Gemma's
// gated FFN); out may alias gate or up. gate, up, out: [n]
void GeluTanhMul(const float* gate, const float* up, int64_t n, float* out);

}  // namespace tpserve
