// Internal to float_panel.h, the AVX-512 level: a float panel's 32 rows of f32 in two zmm (rows 0..15
// and 16..31), the fixed-point panel's sums of them, and how many tokens the passes take at once.
#pragma once

#include <cstdint>

#include "kernels/cpu/simd/fixed_point_lanes.h"
#include "kernels/cpu/simd/intrinsics.h"

namespace tpserve::internal::TPSERVE_ISA_NS {

// Every fma takes its token's activation as a broadcast load, so loads, not the FMA ports, bound the
// panels here (an L1-resident loop of 8 zmm fmas per weight load: 140-155 GFLOP/s of one core's 220
// register-only peak). 32 rows feed each broadcast to two fmas. Measured on 576 x 1536 at T = 128, one
// thread, GFLOP/s: FloatPanel 16 rows (one zmm) 112-119, 32 rows with 6 tokens × 2 lanes per pass
// 140-142 (8 × 1 138-145, 12 × 1 132, 4 × 2 136-138); FixedPanelTokens with its sums in memory 96-110
// whether 4, 8 or 12 tokens, with 4 tokens' sums in registers (PanelSums) 111-114.
inline constexpr int kFloatPanelRows = 32;
inline constexpr int kFloatPanelTokens = 6;
inline constexpr int kFloatPanelLanes = 2;  // lanes per pass of FloatPanel
inline constexpr int kFixedPanelTokens = 4;  // 4 × (2 chains + 4 sums) beside 2 weights in the 32 zmm

// sums[r] += RNE(s_r · 2^32) for 16 rows' terms s, rows 0..7 in lo and 8..15 in hi: the decode path's,
// whose chains are ymm. In ymm, four int64 at a time: joining the halves into a zmm took 576 x 1536 F16 at
// T = 1 from 79-82 to 100-102 us, one thread.
inline void AddFixedTerms16(__m256 lo, __m256 hi, int64_t* sums) {
  const __m256 scale = _mm256_set1_ps(0x1p32f);
  const __m256 s[2] = {_mm256_mul_ps(lo, scale), _mm256_mul_ps(hi, scale)};
  for (int h = 0; h < 2; ++h) {
    for (int q = 0; q < 2; ++q) {
      const __m128 four = q == 0 ? _mm256_castps256_ps128(s[h]) : _mm256_extractf128_ps(s[h], 1);
      auto* d = reinterpret_cast<__m256i*>(sums + 8 * h + 4 * q);
      _mm256_storeu_si256(d, _mm256_add_epi64(_mm256_loadu_si256(d), _mm256_cvtps_epi64(four)));
    }
  }
}

struct PanelRows {
  __m512 lo, hi;

  static PanelRows Zero() { return {_mm512_setzero_ps(), _mm512_setzero_ps()}; }
  static PanelRows Load(const float* p) { return {_mm512_load_ps(p), _mm512_load_ps(p + 16)}; }  // 64-byte aligned
  void Store(float* p) const {
    _mm512_store_ps(p, lo);
    _mm512_store_ps(p + 16, hi);
  }
  // Rows [0, n) to dst, any alignment.
  void StoreFirst(float* dst, int n) const {
    auto first = [](int k) { return static_cast<__mmask16>(k >= 16 ? 0xffff : k <= 0 ? 0 : (1u << k) - 1); };
    _mm512_mask_storeu_ps(dst, first(n), lo);
    _mm512_mask_storeu_ps(dst + 16, first(n - 16), hi);
  }
};

// The fixed-point panel's int64 sums of one token's 32 rows, in registers over the panel's chunks:
// Add(s, _) adds RNE(s_r · 2^32) (AVX-512DQ's direct conversion; kFixedTermBias is 0), Finish(sums) adds
// them to the sums in memory.
struct PanelSums {
  void Add(const PanelRows& s, int64_t*) {
    constexpr int kNearest = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
    const __m512 scale = _mm512_set1_ps(0x1p32f);
    const __m512 rows[2] = {_mm512_mul_ps(s.lo, scale), _mm512_mul_ps(s.hi, scale)};
    for (int h = 0; h < 2; ++h) {
      const __m512i lo = _mm512_cvt_roundps_epi64(_mm512_castps512_ps256(rows[h]), kNearest);
      const __m512i hi = _mm512_cvt_roundps_epi64(_mm512_extractf32x8_ps(rows[h], 1), kNearest);
      v[2 * h] = _mm512_add_epi64(v[2 * h], lo);
      v[2 * h + 1] = _mm512_add_epi64(v[2 * h + 1], hi);
    }
  }
  void Finish(int64_t* sums) const {
    for (int i = 0; i < 4; ++i) {
      _mm512_storeu_si512(sums + 8 * i, _mm512_add_epi64(_mm512_loadu_si512(sums + 8 * i), v[i]));
    }
  }
  __m512i v[4] = {_mm512_setzero_si512(), _mm512_setzero_si512(), _mm512_setzero_si512(),
                  _mm512_setzero_si512()};  // rows 8i..8i+7
};

inline PanelRows operator+(PanelRows a, PanelRows b) { return {_mm512_add_ps(a.lo, b.lo), _mm512_add_ps(a.hi, b.hi)}; }
// w · x and fma(w, x, acc) with x (*x) broadcast to every row.
inline PanelRows Mul(PanelRows w, const float* x) {
  const __m512 xv = _mm512_set1_ps(*x);
  return {_mm512_mul_ps(w.lo, xv), _mm512_mul_ps(w.hi, xv)};
}
inline PanelRows Fma(PanelRows w, const float* x, PanelRows acc) {
  const __m512 xv = _mm512_set1_ps(*x);
  return {_mm512_fmadd_ps(w.lo, xv, acc.lo), _mm512_fmadd_ps(w.hi, xv, acc.hi)};
}

}  // namespace tpserve::internal::TPSERVE_ISA_NS
