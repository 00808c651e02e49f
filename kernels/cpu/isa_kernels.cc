#include "kernels/cpu/isa_kernels.h"

#include "common/check.h"

namespace tpserve::internal {

const IsaKernels& KernelsFor(Isa isa) {
  CHECK(IsaCompiledIn(isa)) << IsaName(isa);
  switch (isa) {
#if TPSERVE_DISPATCH
    case Isa::kAvx512: return isa_avx512::Kernels();
    case Isa::kAvx512Bf16: {
      static const IsaKernels kKernels = [] {
        IsaKernels kernels = isa_avx512::Kernels();
        kernels.float_tiles = isa_avx512bf16::FloatTiles;
        kernels.fixed_point_float_tiles = isa_avx512bf16::FixedPointFloatTiles;
        return kernels;
      }();
      return kKernels;
    }
    case Isa::kAvx2: return isa_avx2::Kernels();
#endif
    default: break;
  }
  return isa_portable::Kernels();
}

}  // namespace tpserve::internal
