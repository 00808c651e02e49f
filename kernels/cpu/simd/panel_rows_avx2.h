// Internal to float_panel.h, the AVX2 level: a panel's 16 rows of f32 in two ymm (rows 0..7 and 8..15),
// and how many tokens its passes take at once.
#pragma once

#include <cstdint>
#include <cstring>

#include "kernels/cpu/simd/fixed_point_lanes.h"
#include "kernels/cpu/simd/intrinsics.h"

namespace tpserve::internal::TPSERVE_ISA_NS {

// 6 tokens × 2 halves: 12 accumulators (or chains) beside 2 weights and a broadcast in the 16 ymm.
inline constexpr int kFloatPanelTokens = 6;
inline constexpr int kFloatPanelLanes = 1;  // lanes per pass of FloatPanel
inline constexpr int kFixedPanelTokens = 6;

struct Rows16 {
  __m256 lo, hi;

  static Rows16 Zero() { return {_mm256_setzero_ps(), _mm256_setzero_ps()}; }
  static Rows16 Load(const float* p) { return {_mm256_load_ps(p), _mm256_load_ps(p + 8)}; }  // 32-byte aligned
  static Rows16 Halves(__m256 lo, __m256 hi) { return {lo, hi}; }
  void Store(float* p) const {
    _mm256_store_ps(p, lo);
    _mm256_store_ps(p + 8, hi);
  }
  // Rows [0, n) to dst, any alignment.
  void StoreFirst(float* dst, int n) const {
    if (n >= 16) {
      _mm256_storeu_ps(dst, lo);
      _mm256_storeu_ps(dst + 8, hi);
      return;
    }
    alignas(32) float v[16];
    Store(v);
    std::memcpy(dst, v, n * sizeof(float));
  }
  // sums[r] += RNE(row r · 2^32) + kFixedTermBias (fixed_point_lanes.h).
  void AddFixedTerms(int64_t* sums) const {
    AddFixedTerms8(lo, sums);
    AddFixedTerms8(hi, sums + 8);
  }
};

inline Rows16 operator+(Rows16 a, Rows16 b) { return {_mm256_add_ps(a.lo, b.lo), _mm256_add_ps(a.hi, b.hi)}; }
// w · x and fma(w, x, acc) with x (*x) broadcast to every row.
inline Rows16 Mul(Rows16 w, const float* x) {
  const __m256 xv = _mm256_broadcast_ss(x);
  return {_mm256_mul_ps(w.lo, xv), _mm256_mul_ps(w.hi, xv)};
}
inline Rows16 Fma(Rows16 w, const float* x, Rows16 acc) {
  const __m256 xv = _mm256_broadcast_ss(x);
  return {_mm256_fmadd_ps(w.lo, xv, acc.lo), _mm256_fmadd_ps(w.hi, xv, acc.hi)};
}

}  // namespace tpserve::internal::TPSERVE_ISA_NS
