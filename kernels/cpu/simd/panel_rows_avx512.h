// Internal to float_panel.h, the AVX-512 level: a panel's 16 rows of f32 in one zmm, and how many tokens
// its passes take at once.
#pragma once

#include <cstdint>

#include "kernels/cpu/simd/fixed_point_lanes.h"
#include "kernels/cpu/simd/intrinsics.h"

namespace tpserve::internal::TPSERVE_ISA_NS {

// Every fma takes its token's activation as a broadcast load, so loads, not the FMA ports, bound the
// panels here (an L1-resident loop of 8 zmm fmas per weight load: 140-155 GFLOP/s of one core's 220
// register-only peak). Measured on 576 x 1536 at T = 128, one thread, GFLOP/s: FloatPanel 6 tokens × 2
// lanes per pass 112-119, 8 × 1 103-106, 12 × 1 105, 4 × 4 109-114; FixedPanelTokens 8 tokens 104-113,
// 6 91-99, 12 95-98.
inline constexpr int kFloatPanelTokens = 6;
inline constexpr int kFloatPanelLanes = 2;  // lanes per pass of FloatPanel
inline constexpr int kFixedPanelTokens = 8;

struct Rows16 {
  __m512 v;

  static Rows16 Zero() { return {_mm512_setzero_ps()}; }
  static Rows16 Load(const float* p) { return {_mm512_load_ps(p)}; }  // 64-byte aligned
  static Rows16 Halves(__m256 lo, __m256 hi) { return {_mm512_insertf32x8(_mm512_castps256_ps512(lo), hi, 1)}; }
  void Store(float* p) const { _mm512_store_ps(p, v); }
  // Rows [0, n) to dst, any alignment.
  void StoreFirst(float* dst, int n) const {
    _mm512_mask_storeu_ps(dst, n >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << n) - 1), v);
  }
  // sums[r] += RNE(row r · 2^32) (fixed_point_lanes.h).
  void AddFixedTerms(int64_t* sums) const { AddFixedTerms16(v, sums); }
};

inline Rows16 operator+(Rows16 a, Rows16 b) { return {_mm512_add_ps(a.v, b.v)}; }
// w · x and fma(w, x, acc) with x (*x) broadcast to every row.
inline Rows16 Mul(Rows16 w, const float* x) { return {_mm512_mul_ps(w.v, _mm512_set1_ps(*x))}; }
inline Rows16 Fma(Rows16 w, const float* x, Rows16 acc) { return {_mm512_fmadd_ps(w.v, _mm512_set1_ps(*x), acc.v)}; }

}  // namespace tpserve::internal::TPSERVE_ISA_NS
