// Internal to quant_panel.h, the AVX-512 (VNNI) level: the passes of NT tokens over an unpacked panel
// (quant_panel_block.h), a field of the 16 rows in one zmm. One VNNI dot of group g's vector with the
// token's 4 shifted activations of that group (broadcast), started from the correction, gives lane g of
// all 16 rows at once; the accumulators hold one lane of 16 outputs each, so the Fold8 tree (and the
// fixed-point block total) is plain vector adds.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "common/dtype.h"
#include "common/quant_block.h"
#include "kernels/cpu/quantize_activations.h"
#include "kernels/cpu/simd/intrinsics.h"
#include "kernels/cpu/simd/quant_panel_block.h"

namespace tpserve::internal::TPSERVE_ISA_NS {

// Every quantised type takes panels here.
template <class Out>
constexpr bool HasPanel(DType) {
  return true;
}

// Group g's 4 shifted activations broadcast to every row.
inline __m512i ActivationGroup(const PanelActivation& a, int g) { return _mm512_set1_epi32(ActivationBytes(a, g)); }

// MatMul's sums of NT tokens over the panel: acc[t][g] is lane g of the 16 rows.
template <DType kType, int NT>
void FloatPanelTokens(const PanelBlock* blocks, int64_t num_blocks, const BlockQ8Act* const (&x)[NT],
                      int num_rows, float* const (&y)[NT]) {
  constexpr MinKind kMin = MinKindOf(kType);
  __m512 acc[NT][8], acc_min[NT];
  for (int t = 0; t < NT; ++t) {
    for (int g = 0; g < 8; ++g) acc[t][g] = _mm512_setzero_ps();
    acc_min[t] = _mm512_setzero_ps();
  }
  for (int64_t b = 0; b < num_blocks; ++b) {
    const PanelBlock& pb = blocks[b];
    PanelActivation a[NT];
    __m512 scale[NT], min_scale[NT];
    for (int t = 0; t < NT; ++t) {
      ReadActivation<kType>(x[t][b], &a[t]);
      scale[t] = _mm512_mul_ps(_mm512_load_ps(pb.d), _mm512_set1_ps(x[t][b].d));
      if constexpr (kMin == MinKind::kHalves) {
        min_scale[t] = _mm512_mul_ps(_mm512_load_ps(pb.neg_dmin), _mm512_set1_ps(x[t][b].d));
      }
    }
#pragma GCC unroll 8
    for (int g = 0; g < 8; ++g) {
      const __m512i q = _mm512_load_si512(pb.q[g]), corr = _mm512_load_si512(pb.corr[g]);
#pragma GCC unroll 4
      for (int t = 0; t < NT; ++t) {
        __m512i dot = _mm512_dpbusd_epi32(corr, ActivationGroup(a[t], g), q);
        if constexpr (HasHalfScales(kType)) dot = _mm512_mullo_epi32(dot, _mm512_load_si512(pb.scale[g / 4]));
        acc[t][g] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), scale[t], acc[t][g]);
        if constexpr (kMin == MinKind::kHalves) {
          const __m512i min_lanes =
              _mm512_mullo_epi32(_mm512_set1_epi32(a[t].sums[g]), _mm512_load_si512(pb.min[g / 4]));
          acc[t][g] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(min_lanes), min_scale[t], acc[t][g]);
        }
      }
    }
    if constexpr (kMin == MinKind::kOffset) {
      for (int t = 0; t < NT; ++t) {
        acc_min[t] = _mm512_add_ps(acc_min[t], _mm512_mul_ps(_mm512_load_ps(pb.m), _mm512_set1_ps(x[t][b].sum)));
      }
    }
  }
  const __mmask16 rows = static_cast<__mmask16>((1u << num_rows) - 1);
  for (int t = 0; t < NT; ++t) {
    __m512 s[4];
    for (int i = 0; i < 4; ++i) s[i] = _mm512_add_ps(acc[t][i], acc[t][i + 4]);
    const __m512 folded = _mm512_add_ps(_mm512_add_ps(s[0], s[2]), _mm512_add_ps(s[1], s[3]));
    _mm512_mask_storeu_ps(y[t], rows, _mm512_add_ps(folded, acc_min[t]));
  }
}

// MatMulFixedPoint's sums of NT tokens over the panel: per block the 16 rows' exact totals, their
// terms, rounded into int64 rows 0..7 and 8..15.
template <DType kType, int NT>
void FixedPanelTokens(const PanelBlock* blocks, int64_t num_blocks, const BlockQ8Act* const (&x)[NT],
                      int num_rows, int64_t* const (&y)[NT]) {
  constexpr MinKind kMin = MinKindOf(kType);
  constexpr int kRound = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
  __m512i acc[NT][2];
  for (int t = 0; t < NT; ++t) acc[t][0] = acc[t][1] = _mm512_setzero_si512();
  for (int64_t b = 0; b < num_blocks; ++b) {
    const PanelBlock& pb = blocks[b];
#pragma GCC unroll 4
    for (int t = 0; t < NT; ++t) {
      const BlockQ8Act& xa = x[t][b];
      PanelActivation a;
      ReadActivation<kType>(xa, &a);
      __m512i half[2] = {_mm512_load_si512(pb.half_corr[0]), _mm512_load_si512(pb.half_corr[1])};
#pragma GCC unroll 8
      for (int g = 0; g < 8; ++g) half[g / 4] = _mm512_dpbusd_epi32(half[g / 4], ActivationGroup(a, g), _mm512_load_si512(pb.q[g]));
      const __m512i total = HasHalfScales(kType)
                                ? _mm512_add_epi32(_mm512_mullo_epi32(half[0], _mm512_load_si512(pb.scale[0])),
                                                   _mm512_mullo_epi32(half[1], _mm512_load_si512(pb.scale[1])))
                                                 : _mm512_add_epi32(half[0], half[1]);
      __m512 terms = _mm512_mul_ps(_mm512_cvtepi32_ps(total), _mm512_mul_ps(_mm512_load_ps(pb.d), _mm512_set1_ps(xa.d)));
      if constexpr (kMin == MinKind::kOffset) {
        terms = _mm512_add_ps(terms, _mm512_mul_ps(_mm512_load_ps(pb.m), _mm512_set1_ps(xa.sum)));
      }
      if constexpr (kMin == MinKind::kHalves) {
        const auto half_sum = [&](int h) {
          return a.sums[4 * h] + a.sums[4 * h + 1] + a.sums[4 * h + 2] + a.sums[4 * h + 3];
        };
        const __m512i min_total =
            _mm512_add_epi32(_mm512_mullo_epi32(_mm512_set1_epi32(half_sum(0)), _mm512_load_si512(pb.min[0])),
                             _mm512_mullo_epi32(_mm512_set1_epi32(half_sum(1)), _mm512_load_si512(pb.min[1])));
        terms = _mm512_add_ps(terms, _mm512_mul_ps(_mm512_cvtepi32_ps(min_total),
                                                   _mm512_mul_ps(_mm512_load_ps(pb.neg_dmin), _mm512_set1_ps(xa.d))));
      }
      acc[t][0] = _mm512_add_epi64(acc[t][0], _mm512_cvt_roundps_epi64(_mm512_castps512_ps256(terms), kRound));
      acc[t][1] = _mm512_add_epi64(acc[t][1], _mm512_cvt_roundps_epi64(_mm512_extractf32x8_ps(terms, 1), kRound));
    }
  }
  const __mmask8 lo = static_cast<__mmask8>(num_rows >= 8 ? 0xff : (1u << num_rows) - 1);
  const __mmask8 hi = static_cast<__mmask8>(num_rows <= 8 ? 0 : (1u << (num_rows - 8)) - 1);
  for (int t = 0; t < NT; ++t) {
    _mm512_mask_storeu_epi64(y[t], lo, acc[t][0]);
    _mm512_mask_storeu_epi64(y[t] + 8, hi, acc[t][1]);
  }
}

// The tokens of one reduction at a time: float sums take 3 (24 accumulators), fixed-point sums 4.
template <class Out>
constexpr int kPanelTokens = std::is_same_v<Out, float> ? 3 : 4;

}  // namespace tpserve::internal::TPSERVE_ISA_NS
