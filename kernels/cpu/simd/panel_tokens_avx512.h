// Internal to quant_panel.h, the AVX-512 (VNNI) level: the passes of NT tokens over an unpacked panel
// (quant_panel_block.h), a field of the 16 rows in one zmm. VNNI dots of each group's vector with the
// token's 4 shifted activations of that group (broadcast), started from the correction, give the
// block's exact total of all 16 rows at once.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "common/dtype.h"
#include "common/quant_block.h"
#include "kernels/cpu/simd/intrinsics.h"
#include "kernels/cpu/simd/quant_panel_block.h"

namespace tpserve::internal::TPSERVE_ISA_NS {

// Every quantised type takes panels here.
template <class Out>
constexpr bool HasPanel(DType) {
  return true;
}

// The fewest tokens that take the panels here: below, the row quads take the batch (quant_row_quads.h's
// QuadTokenRows). On a Sapphire Rapids VM the quads led up to 32 tokens (SmolLM2 Q4_1 decode at 2 threads,
// tok/s, panels → quads: batch 16 574-609 → 872-936, 24 699-723 → 851-880, 32 775-866 → 870-885); on the Zen 5
// VM the panels lead from 16 (quads → panels, two interleaved rounds: SmolLM2 Q4_1 batch 8 946-1057 →
// 674-796, 16 1144-1159 → 1082-1326, 24 1199-1238 → 1361-1375, 32 967-1266 → 1557-1650; the 1B model's Q8_0
// batch 12 148-162 → 107-129, 16 130-148 → 152-162, 32 116-127 → 248-253; bench/README.md, "K-quants by the
// super-block").
inline constexpr int64_t kQuantPanelMinTokens = 16;

// The activations as the panel dots them: a + 128 for every type (VNNI sums in int32).
constexpr bool ShiftsActivations(DType) { return true; }

// Group g's 4 shifted activations broadcast to every row.
inline __m512i ActivationGroup(const PanelActivation& a, int g) { return _mm512_set1_epi32(ActivationBytes(a, g)); }

// Block pb's exact totals T_b of the 16 rows against each of NT tokens (and Q2_K's M_b).
template <DType kType, int NT>
inline void BlockTotals(const PanelBlock& pb, const PanelActivation* const (&a)[NT], int64_t b, __m512i (&total)[NT],
                        __m512i (&min_total)[NT]) {
  for (int t = 0; t < NT; ++t) {
    const PanelActivation& at = a[t][b];
    if constexpr (HasHalfScales(kType)) {
      __m512i half[2] = {_mm512_load_si512(pb.half_corr[0]), _mm512_load_si512(pb.half_corr[1])};
#pragma GCC unroll 8
      for (int g = 0; g < 8; ++g) {
        half[g / 4] = _mm512_dpbusd_epi32(half[g / 4], ActivationGroup(at, g), _mm512_load_si512(pb.q[g]));
      }
      total[t] = _mm512_add_epi32(_mm512_mullo_epi32(half[0], _mm512_load_si512(pb.scale[0])),
                                  _mm512_mullo_epi32(half[1], _mm512_load_si512(pb.scale[1])));
    } else {
      __m512i sum = _mm512_load_si512(pb.corr);
#pragma GCC unroll 8
      for (int g = 0; g < 8; ++g) sum = _mm512_dpbusd_epi32(sum, ActivationGroup(at, g), _mm512_load_si512(pb.q[g]));
      total[t] = sum;
    }
    if constexpr (MinKindOf(kType) == MinKind::kHalves) {
      min_total[t] = _mm512_add_epi32(_mm512_mullo_epi32(_mm512_set1_epi32(at.half_sums[0]), _mm512_load_si512(pb.min[0])),
                                      _mm512_mullo_epi32(_mm512_set1_epi32(at.half_sums[1]), _mm512_load_si512(pb.min[1])));
    }
  }
}

// MatMul's sums: per token the f32 accumulator and the offset sum beside it.
template <DType kType, int NT>
struct FloatPanelSums {
  FloatPanelSums() {
    for (int t = 0; t < NT; ++t) acc[t] = acc_min[t] = _mm512_setzero_ps();
  }
  void Add(int t, const PanelBlock& pb, __m512i total, __m512i min_total, const PanelActivation& xa) {
    const __m512 ad = _mm512_set1_ps(xa.d);
    acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(total), _mm512_mul_ps(_mm512_load_ps(pb.d), ad), acc[t]);
    if constexpr (MinKindOf(kType) == MinKind::kHalves) {
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(min_total), _mm512_mul_ps(_mm512_load_ps(pb.neg_dmin), ad), acc[t]);
    }
    if constexpr (MinKindOf(kType) == MinKind::kOffset) {
      acc_min[t] = _mm512_add_ps(acc_min[t], _mm512_mul_ps(_mm512_load_ps(pb.m), _mm512_set1_ps(xa.sum)));
    }
  }
  void Store(int t, int num_rows, float* y) const {
    _mm512_mask_storeu_ps(y, static_cast<__mmask16>((1u << num_rows) - 1), _mm512_add_ps(acc[t], acc_min[t]));
  }
  __m512 acc[NT], acc_min[NT];
};

// MatMulFixedPoint's sums: per token and block the 16 rows' terms, rounded into int64 rows 0..7 and 8..15.
template <DType kType, int NT>
struct FixedPanelSums {
  FixedPanelSums() {
    for (int t = 0; t < NT; ++t) acc[t][0] = acc[t][1] = _mm512_setzero_si512();
  }
  void Add(int t, const PanelBlock& pb, __m512i total, __m512i min_total, const PanelActivation& xa) {
    constexpr int kRound = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
    __m512 terms = _mm512_mul_ps(_mm512_cvtepi32_ps(total), _mm512_mul_ps(_mm512_load_ps(pb.d), _mm512_set1_ps(xa.d)));
    if constexpr (MinKindOf(kType) == MinKind::kOffset) {
      terms = _mm512_add_ps(terms, _mm512_mul_ps(_mm512_load_ps(pb.m), _mm512_set1_ps(xa.sum)));
    }
    if constexpr (MinKindOf(kType) == MinKind::kHalves) {
      terms = _mm512_add_ps(terms, _mm512_mul_ps(_mm512_cvtepi32_ps(min_total),
                                                 _mm512_mul_ps(_mm512_load_ps(pb.neg_dmin), _mm512_set1_ps(xa.d))));
    }
    acc[t][0] = _mm512_add_epi64(acc[t][0], _mm512_cvt_roundps_epi64(_mm512_castps512_ps256(terms), kRound));
    acc[t][1] = _mm512_add_epi64(acc[t][1], _mm512_cvt_roundps_epi64(_mm512_extractf32x8_ps(terms, 1), kRound));
  }
  void Store(int t, int num_rows, int64_t* y) const {
    const __mmask8 lo = static_cast<__mmask8>(num_rows >= 8 ? 0xff : (1u << num_rows) - 1);
    const __mmask8 hi = static_cast<__mmask8>(num_rows <= 8 ? 0 : (1u << (num_rows - 8)) - 1);
    _mm512_mask_storeu_epi64(y, lo, acc[t][0]);
    _mm512_mask_storeu_epi64(y + 8, hi, acc[t][1]);
  }
  __m512i acc[NT][2];
};

// NT tokens over the panel's 16 rows, block after block.
template <DType kType, class Sums, int NT, class Out>
void PanelPass(const PanelBlock* blocks, int64_t num_blocks, const PanelActivation* const (&a)[NT], int num_rows,
               Out* const (&y)[NT]) {
  Sums sums;
  for (int64_t b = 0; b < num_blocks; ++b) {
    const PanelBlock& pb = blocks[b];
    __m512i total[NT], min_total[NT] = {};
    BlockTotals<kType, NT>(pb, a, b, total, min_total);
    for (int t = 0; t < NT; ++t) sums.Add(t, pb, total[t], min_total[t], a[t][b]);
  }
  for (int t = 0; t < NT; ++t) sums.Store(t, num_rows, y[t]);
}

// The tokens of one pass (32 zmm leave room for more; not measured on an AVX-512 host since the block
// totals, which need a register per token where the 8 lanes took 8).
template <class Out>
constexpr int kPanelTokens = 4;

}  // namespace tpserve::internal::TPSERVE_ISA_NS
