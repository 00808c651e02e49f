// Internal to float_panel.h, the AVX-512 level: a float panel's 48 rows of f32 in three zmm, the
// fixed-point panel's 32 in two and its sums of them, and how many tokens the passes take at once.
#pragma once

#include <cstdint>

#include "kernels/cpu/simd/fixed_point_lanes.h"
#include "kernels/cpu/simd/intrinsics.h"

namespace tpserve::internal::TPSERVE_ISA_NS {

// Every fma takes its token's activation as a broadcast load, so loads, not the FMA ports, bound the
// panels here (an L1-resident loop of 8 zmm fmas per weight load: 140-155 GFLOP/s of one core's 220
// register-only peak). 32 rows fed each broadcast to two fmas. Measured on 576 x 1536 at T = 128, one
// thread, GFLOP/s: FloatPanel 16 rows (one zmm) 112-119, 32 rows with 6 tokens × 2 lanes per pass
// 140-142 (8 × 1 138-145, 12 × 1 132, 4 × 2 136-138); FixedPanelTokens with its sums in memory 96-110
// whether 4, 8 or 12 tokens, with 4 tokens' sums in registers (PanelSums) 111-114.
// 48 rows (three zmm) feed each broadcast to three fmas and read the packed panel once per 7 tokens: at
// T = 512 FloatPanel went from 134-135 to 150-158 GFLOP/s (F32), 145-147 to 158-160 (F16), 132-145 to
// 155-161 (BF16); 8 tokens spill (54). The fixed-point panel stays at 32 rows: at 48 it has room for 3
// tokens' chains and sums only, 93-96 against 110-122.
inline constexpr int kFloatPanelRows = 48;
inline constexpr int kFloatPanelTokens = 7;  // 7 × 3 accumulators beside 3 weights in the 32 zmm
inline constexpr int kFloatPanelLanes = 1;   // lanes per pass of FloatPanel
inline constexpr int kFixedPanelRows = 32;
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

// A panel column's rows of f32, 16 in each of kParts zmm.
template <int kParts>
struct PanelRowsOf {
  __m512 v[kParts];

  static PanelRowsOf Zero() {
    PanelRowsOf p;
    for (int i = 0; i < kParts; ++i) p.v[i] = _mm512_setzero_ps();
    return p;
  }
  static PanelRowsOf Load(const float* p) {  // 64-byte aligned
    PanelRowsOf r;
    for (int i = 0; i < kParts; ++i) r.v[i] = _mm512_load_ps(p + 16 * i);
    return r;
  }
  void Store(float* p) const {
    for (int i = 0; i < kParts; ++i) _mm512_store_ps(p + 16 * i, v[i]);
  }
  // Rows [0, n) to dst, any alignment.
  void StoreFirst(float* dst, int n) const {
    auto first = [](int k) { return static_cast<__mmask16>(k >= 16 ? 0xffff : k <= 0 ? 0 : (1u << k) - 1); };
    for (int i = 0; i < kParts; ++i) _mm512_mask_storeu_ps(dst + 16 * i, first(n - 16 * i), v[i]);
  }
};
using FloatRows = PanelRowsOf<kFloatPanelRows / 16>;
using FixedRows = PanelRowsOf<kFixedPanelRows / 16>;

// The fixed-point panel's int64 sums of one token's rows, in registers over the panel's chunks:
// Add(s, _) adds RNE(s_r · 2^32) (AVX-512DQ's direct conversion; kFixedTermBias is 0), Finish(sums) adds
// them to the sums in memory.
struct PanelSums {
  static constexpr int kParts = kFixedPanelRows / 16;
  PanelSums() {
    for (__m512i& x : v) x = _mm512_setzero_si512();
  }
  void Add(const FixedRows& s, int64_t*) {
    constexpr int kNearest = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
    const __m512 scale = _mm512_set1_ps(0x1p32f);
    for (int h = 0; h < kParts; ++h) {
      const __m512 rows = _mm512_mul_ps(s.v[h], scale);
      const __m512i lo = _mm512_cvt_roundps_epi64(_mm512_castps512_ps256(rows), kNearest);
      const __m512i hi = _mm512_cvt_roundps_epi64(_mm512_extractf32x8_ps(rows, 1), kNearest);
      v[2 * h] = _mm512_add_epi64(v[2 * h], lo);
      v[2 * h + 1] = _mm512_add_epi64(v[2 * h + 1], hi);
    }
  }
  void Finish(int64_t* sums) const {
    for (int i = 0; i < 2 * kParts; ++i) {
      _mm512_storeu_si512(sums + 8 * i, _mm512_add_epi64(_mm512_loadu_si512(sums + 8 * i), v[i]));
    }
  }
  __m512i v[2 * kParts];  // rows 8i..8i+7
};

template <int kParts>
inline PanelRowsOf<kParts> operator+(PanelRowsOf<kParts> a, PanelRowsOf<kParts> b) {
  for (int i = 0; i < kParts; ++i) a.v[i] = _mm512_add_ps(a.v[i], b.v[i]);
  return a;
}
// w · x and fma(w, x, acc) with x (*x) broadcast to every row.
template <int kParts>
inline PanelRowsOf<kParts> Mul(PanelRowsOf<kParts> w, const float* x) {
  const __m512 xv = _mm512_set1_ps(*x);
  for (int i = 0; i < kParts; ++i) w.v[i] = _mm512_mul_ps(w.v[i], xv);
  return w;
}
template <int kParts>
inline PanelRowsOf<kParts> Fma(PanelRowsOf<kParts> w, const float* x, PanelRowsOf<kParts> acc) {
  const __m512 xv = _mm512_set1_ps(*x);
  for (int i = 0; i < kParts; ++i) acc.v[i] = _mm512_fmadd_ps(w.v[i], xv, acc.v[i]);
  return acc;
}

}  // namespace tpserve::internal::TPSERVE_ISA_NS
