#include "kernels/cpu/silu_mul.h"

#include "kernels/cpu/portable_math.h"

namespace tpserve {

void SiluMul(const float* gate, const float* up, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    out[i] = g / (1.0f + PortableExpF(-g)) * up[i];
  }
}

}  // namespace tpserve
