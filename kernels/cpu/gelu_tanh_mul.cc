#include "kernels/cpu/gelu_tanh_mul.h"

#include "kernels/cpu/isa_kernels.h"

namespace tpserve {

void GeluTanhMul(const float* gate, const float* up, int64_t n, float* out) {
  internal::ActiveKernels().gelu_tanh_mul(gate, up, n, out);
}

}  // namespace tpserve
