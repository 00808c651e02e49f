// Internal to float_panel.h, the AVX2 level: a float panel's 16 rows of f32 in two ymm (rows 0..7 and
// 8..15), and how many tokens its passes take at once.
#pragma once

#include <cstdint>
#include <cstring>

#include "kernels/cpu/simd/fixed_point_lanes.h"
#include "kernels/cpu/simd/intrinsics.h"

namespace tpserve::internal::TPSERVE_ISA_NS {

inline constexpr int kFloatPanelRows = 16;
// 6 tokens × 2 halves: 12 accumulators (or chains) beside 2 weights and a broadcast in the 16 ymm.
inline constexpr int kFloatPanelTokens = 6;
inline constexpr int kFloatPanelLanes = 1;  // lanes per pass of FloatPanel
inline constexpr int kFixedPanelRows = 16;
inline constexpr int kFixedPanelTokens = 6;

// sums[r] += RNE(s_r · 2^32) + kFixedTermBias (fixed_point_lanes.h) for 16 rows' terms s, rows 0..7 in lo
// and 8..15 in hi.
inline void AddFixedTerms16(__m256 lo, __m256 hi, int64_t* sums) {
  AddFixedTerms8(lo, sums);
  AddFixedTerms8(hi, sums + 8);
}

struct PanelRows {
  __m256 lo, hi;

  static PanelRows Zero() { return {_mm256_setzero_ps(), _mm256_setzero_ps()}; }
  static PanelRows Load(const float* p) { return {_mm256_load_ps(p), _mm256_load_ps(p + 8)}; }  // 32-byte aligned
  void Store(float* p) const {
    _mm256_store_ps(p, lo);
    _mm256_store_ps(p + 8, hi);
  }
  // Rows [0, n) to dst, any alignment.
  void StoreFirst(float* dst, int n) const {
    if (n >= kFloatPanelRows) {
      _mm256_storeu_ps(dst, lo);
      _mm256_storeu_ps(dst + 8, hi);
      return;
    }
    alignas(32) float v[kFloatPanelRows];
    Store(v);
    std::memcpy(dst, v, n * sizeof(float));
  }
};

// The fixed-point panel's int64 sums of one token's 16 rows, in memory: Add(s, sums) does sums[r] +=
// RNE(s_r · 2^32) + kFixedTermBias at once (the 16 ymm have no room to hold them).
struct PanelSums {
  void Add(const PanelRows& s, int64_t* sums) { AddFixedTerms16(s.lo, s.hi, sums); }
  void Finish(int64_t*) const {}
};

using FloatRows = PanelRows;
using FixedRows = PanelRows;

inline PanelRows operator+(PanelRows a, PanelRows b) { return {_mm256_add_ps(a.lo, b.lo), _mm256_add_ps(a.hi, b.hi)}; }
// w · x and fma(w, x, acc) with x (*x) broadcast to every row.
inline PanelRows Mul(PanelRows w, const float* x) {
  const __m256 xv = _mm256_broadcast_ss(x);
  return {_mm256_mul_ps(w.lo, xv), _mm256_mul_ps(w.hi, xv)};
}
inline PanelRows Fma(PanelRows w, const float* x, PanelRows acc) {
  const __m256 xv = _mm256_broadcast_ss(x);
  return {_mm256_fmadd_ps(w.lo, xv, acc.lo), _mm256_fmadd_ps(w.hi, xv, acc.hi)};
}

}  // namespace tpserve::internal::TPSERVE_ISA_NS
