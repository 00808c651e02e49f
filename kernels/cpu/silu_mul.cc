#include "kernels/cpu/silu_mul.h"

#include "kernels/cpu/isa_kernels.h"

namespace tpserve {

void SiluMul(const float* gate, const float* up, int64_t n, float* out) {
  internal::ActiveKernels().silu_mul(gate, up, n, out);
}

}  // namespace tpserve
