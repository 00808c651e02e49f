// Internal to quant_row_quads.h, the AVX2 level: four weight rows as two ymm per half of a block (rows 0
// and 1 in the 128-bit lanes of the first, rows 2 and 3 in the second), and the operations the four-row
// reader and reductions need on them. AVX2 has no VNNI: a lane's 4-value dot is maddubs (u8 × s8 into
// int16 pairs) then madd with ones. No pair saturates: every type here is dotted with unsigned values of
// at most 63 (Q6_K; 2 · 63 · 127 < 2^15), and Q8_0 through |w| · (a with w's sign) (2 · 127 · 127).
#pragma once

#include <cstdint>

#include "common/dtype.h"
#include "common/quant_block.h"
#include "kernels/cpu/quantize_activations.h"
#include "kernels/cpu/simd/intrinsics.h"
#include "kernels/cpu/simd/quant_quad_basics.h"
#include "kernels/cpu/simd/quant_unpack.h"

namespace tpserve::internal::TPSERVE_ISA_NS {

// Four rows' 16 bytes: v[0] holds rows 0 and 1 (one per 128-bit lane), v[1] rows 2 and 3.
struct QuadVec {
  __m256i v[2];
};

inline QuadVec ZeroQuad() { return {{_mm256_setzero_si256(), _mm256_setzero_si256()}}; }
inline QuadVec Or(QuadVec a, QuadVec b) { return {{_mm256_or_si256(a.v[0], b.v[0]), _mm256_or_si256(a.v[1], b.v[1])}}; }
inline QuadVec ShiftLeft4(QuadVec v) { return {{_mm256_slli_epi16(v.v[0], 4), _mm256_slli_epi16(v.v[1], 4)}}; }

inline QuadVec Load4x16(const uint8_t* p, int64_t stride) {
  const auto at = [&](int r) { return reinterpret_cast<const __m128i*>(p + r * stride); };
  return {{_mm256_loadu2_m128i(at(1), at(0)), _mm256_loadu2_m128i(at(3), at(2))}};
}

// (v >> shift) & mask per byte (quant_unpack.h's, on both halves; no shift at all for 0).
inline QuadVec ShiftMask(QuadVec v, int shift, int mask) {
  if (shift == 0) {
    const __m256i m = _mm256_set1_epi8(static_cast<char>(mask));
    return {{_mm256_and_si256(v.v[0], m), _mm256_and_si256(v.v[1], m)}};
  }
  return {{ShiftMask(v.v[0], shift, mask), ShiftMask(v.v[1], shift, mask)}};
}

// Q5_0/Q5_1: 0x10 in the bytes whose fifth bit is set. Bit j of row r's 32-bit qh is value j of the row:
// bits 0..15 go to `lo`'s lane of row r, 16..31 to `hi`'s.
inline void AddFifthBits(const uint8_t* qh, int64_t stride, QuadVec* lo, QuadVec* hi) {
  // Byte j of a lane takes byte j / 8 of its row's qh (0 and 1 for `lo`, 2 and 3 for `hi`), then tests
  // bit j % 8.
  const __m256i lo_bytes = _mm256_setr_epi64x(0, 0x0101010101010101, 0, 0x0101010101010101);
  const __m256i hi_bytes = _mm256_setr_epi64x(0x0202020202020202, 0x0303030303030303, 0x0202020202020202,
                                              0x0303030303030303);
  const __m256i bit = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ull));
  const __m256i fifth = _mm256_set1_epi8(0x10);
  const auto bits = [&](__m256i rows, __m256i bytes) {
    const __m256i spread = _mm256_shuffle_epi8(rows, bytes);
    return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit), fifth);
  };
  for (int p = 0; p < 2; ++p) {
    // Two broadcast loads and a blend (a set of two 128-bit halves took five instructions).
    const __m256i rows = _mm256_blend_epi32(_mm256_set1_epi32(LoadI32(qh + 2 * p * stride)),
                                            _mm256_set1_epi32(LoadI32(qh + (2 * p + 1) * stride)), 0xf0);
    lo->v[p] = _mm256_or_si256(lo->v[p], bits(rows, lo_bytes));
    hi->v[p] = _mm256_or_si256(hi->v[p], bits(rows, hi_bytes));
  }
}

// Q6_K: a super-block's int8 scales of 16 values, row r's in its lane; each row's half h, sign-extended
// into the four int32 of its lane (byte h moved to the top byte of each, then shifted down).
inline QuadVec HalfScale(QuadVec scales, int h) {
  const __m256i pick = _mm256_set1_epi32(static_cast<int>((h << 24) | 0x808080));
  return {{_mm256_srai_epi32(_mm256_shuffle_epi8(scales.v[0], pick), 24),
           _mm256_srai_epi32(_mm256_shuffle_epi8(scales.v[1], pick), 24)}};
}

// The activation block's halves, each in both lanes, and (biased types) bias · the sum of each 4 values.
struct QuadAct {
  __m256i lo, hi;
  __m256i lo_bias = _mm256_setzero_si256(), hi_bias = _mm256_setzero_si256();
};

template <DType kType>
inline QuadAct LoadQuadAct(const BlockQ8Act& a) {
  QuadAct qa;
  qa.lo = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a.qs)));
  qa.hi = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a.qs + 16)));
  if constexpr (kBiasShift<kType> >= 0) {
    const __m256i ones = _mm256_set1_epi8(1);
    qa.lo_bias = _mm256_slli_epi32(DotU8S8(ones, qa.lo), kBiasShift<kType>);
    qa.hi_bias = _mm256_slli_epi32(DotU8S8(ones, qa.hi), kBiasShift<kType>);
  }
  return qa;
}

// The exact integer lanes of one half: Σ_{j<4} w·a over the four values of each lane (times the half's
// integer scale for Q6_K). A biased type's lane is Σ q·a − bias·Σa; Q8_0's signed w goes through
// |w| · (a with w's sign).
template <DType kType>
inline QuadVec QuadLanes(QuadVec w, __m256i a, __m256i bias_sum, QuadVec scale) {
  QuadVec dot;
  for (int p = 0; p < 2; ++p) {
    if constexpr (kType == DType::kQ8_0) {
      dot.v[p] = DotS8S8(w.v[p], a);
    } else {
      dot.v[p] = DotU8S8(w.v[p], a);
    }
    if constexpr (kBiasShift<kType> >= 0) dot.v[p] = _mm256_sub_epi32(dot.v[p], bias_sum);
    if constexpr (HasHalfScales(kType)) dot.v[p] = _mm256_mullo_epi32(dot.v[p], scale.v[p]);
  }
  (void)bias_sum;
  (void)scale;
  return dot;
}

// Rows 0-1 (s0) and 2-3 (s1) of int32 lanes, a row per 128-bit lane → each row's total, rows in order.
inline __m128i FoldRows(__m256i s0, __m256i s1) {
  __m256i h = _mm256_hadd_epi32(s0, s1);  // [r0 r0 r2 r2 | r1 r1 r3 r3], pairs of each row's lanes
  h = _mm256_hadd_epi32(h, h);             // [r0 r2 r0 r2 | r1 r3 r1 r3]
  return _mm_unpacklo_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
}

// The four rows' exact integer totals of their 8 lanes (lanes 0..3 in `lo`, 4..7 in `hi`), rows in order.
inline __m128i RowTotals(const QuadVec& lo, const QuadVec& hi) {
  return FoldRows(_mm256_add_epi32(lo.v[0], hi.v[0]), _mm256_add_epi32(lo.v[1], hi.v[1]));
}

// The four rows' exact block totals, rows in order. Without half scales a row's two halves share their
// int16 pairs before one madd: unsigned q of at most 31 (the Q4 and Q5 types) keep 2 · 2 · 31 · 127 below
// 2^15. Q8_0 (the sign trick) and the half-scale types go lane by lane (QuadLanes).
template <DType kType>
inline __m128i QuadTotals(const QuadVec& lo, const QuadVec& hi, const QuadAct& a, const QuadVec& lo_scale,
                          const QuadVec& hi_scale) {
  if constexpr (kType == DType::kQ8_0 || HasHalfScales(kType)) {
    return RowTotals(QuadLanes<kType>(lo, a.lo, a.lo_bias, lo_scale), QuadLanes<kType>(hi, a.hi, a.hi_bias, hi_scale));
  } else {
    __m256i s[2];
    for (int p = 0; p < 2; ++p) {
      const __m256i pairs = _mm256_add_epi16(_mm256_maddubs_epi16(lo.v[p], a.lo), _mm256_maddubs_epi16(hi.v[p], a.hi));
      s[p] = _mm256_madd_epi16(pairs, _mm256_set1_epi16(1));
      if constexpr (kBiasShift<kType> >= 0) s[p] = _mm256_sub_epi32(s[p], _mm256_add_epi32(a.lo_bias, a.hi_bias));
    }
    return FoldRows(s[0], s[1]);
  }
}

}  // namespace tpserve::internal::TPSERVE_ISA_NS
