#include "kernels/cpu/matmul_fixed_point.h"

#include "kernels/cpu/matmul_tile.h"

namespace tpserve {

void MatMulFixedPoint(const WeightMatrix& w, const float* x, int64_t num_tokens, int64_t* y_fixed,
                      ThreadPool* pool) {
  const internal::TileTable<int64_t>& table =
      IsQuantized(w.type) ? internal::FixedPointQuantTiles(w.type) : internal::FixedPointFloatTiles(w.type);
  internal::RunMatMul(table, w, x, num_tokens, y_fixed, pool);
}

void FixedPointToFloat(const int64_t* fixed, int64_t n, float* out) {
  constexpr float kUnit = 1.0f / kFixedPointScale;  // 2^-32, exact
  // int64 → f32 rounds once (nearest even); the power-of-two scale is exact.
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(fixed[i]) * kUnit;
}

}  // namespace tpserve
