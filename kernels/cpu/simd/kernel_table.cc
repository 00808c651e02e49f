// This level's IsaKernels, for KernelsFor (kernels/cpu/isa_kernels.cc).
#include "kernels/cpu/isa_kernels.h"
#include "kernels/cpu/simd/level_kernels.h"

namespace tpserve::internal::TPSERVE_ISA_NS {

const IsaKernels& Kernels() {
  static const IsaKernels kKernels{FloatTiles, QuantTiles, FixedPointFloatTiles, FixedPointQuantTiles,
                                   QuantizeActivationRow, DotRows, DequantizeKvRow, ExpScores,
                                   AccumulateRows, SiluMulRows, GeluTanhMulRows};
  return kKernels;
}

}  // namespace tpserve::internal::TPSERVE_ISA_NS
