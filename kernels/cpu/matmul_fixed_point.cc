#include "kernels/cpu/matmul_fixed_point.h"

#include "common/check.h"
#include "kernels/cpu/isa_kernels.h"
#include "kernels/cpu/matmul_tile.h"

namespace tpserve {

void MatMulFixedPoint(const WeightMatrix& w, const float* x, int64_t num_tokens, int64_t* y_fixed,
                      ThreadPool* pool) {
  CHECK(IsQuantized(w.type) || w.type == DType::kF32 || w.type == DType::kF16 || w.type == DType::kBF16)
      << "no matmul for " << DTypeName(w.type);
  const internal::IsaKernels& kernels = internal::ActiveKernels();
  const internal::TileTable<int64_t>& table =
      IsQuantized(w.type) ? kernels.fixed_point_quant_tiles(w.type) : kernels.fixed_point_float_tiles(w.type);
  internal::RunMatMul(table, {&w, 1}, x, num_tokens, {&y_fixed, 1}, pool);
}

void FixedPointToFloat(const int64_t* fixed, int64_t n, float* out) {
  constexpr float kUnit = 1.0f / kFixedPointScale;  // 2^-32, exact
  // int64 → f32 rounds once (nearest even); the power-of-two scale is exact.
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(fixed[i]) * kUnit;
}

}  // namespace tpserve
