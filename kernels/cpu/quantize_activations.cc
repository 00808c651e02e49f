#include "kernels/cpu/quantize_activations.h"

#include "common/check.h"
#include "kernels/cpu/isa_kernels.h"

namespace tpserve {

// The kernel itself, one per instruction-set level: kernels/cpu/simd/quantize_activations.cc.
void QuantizeActivationRow(const float* x, int64_t n, BlockQ8Act* dst) {
  CHECK_EQ(n % kQuantBlock, 0);
  internal::ActiveKernels().quantize_activation_row(x, n, dst);
}

}  // namespace tpserve
