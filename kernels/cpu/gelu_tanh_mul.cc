#include "kernels/cpu/gelu_tanh_mul.h"

#include "kernels/cpu/portable_math.h"

namespace tpserve {

void GeluTanhMul(const float* gate, const float* up, int64_t n, float* out) {
  constexpr float kSqrt2OverPi = 0.7978845608028654f;
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    // (1 + tanh(u)) / 2 = 1 / (1 + e^(-2u)): the SiLU form, with PortableExpF's fixed bits on every CPU.
    const float u = kSqrt2OverPi * (g + 0.044715f * g * g * g);
    out[i] = g / (1.0f + PortableExpF(-2.0f * u)) * up[i];
  }
}

}  // namespace tpserve
