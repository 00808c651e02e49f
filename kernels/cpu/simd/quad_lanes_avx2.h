// Internal to quant_row_quads.h, the AVX2 level: four weight rows as two ymm per half of a block (rows 0
// and 1 in the 128-bit lanes of the first, rows 2 and 3 in the second), and the operations the four-row
// reader and reductions need on them. AVX2 has no VNNI: a lane's 4-value dot is maddubs (u8 × s8 into
// int16 pairs) then madd with ones. No pair saturates: every type here is dotted with unsigned values of
// at most 63 (Q6_K; 2 · 63 · 127 < 2^15), and Q8_0 through |w| · (a with w's sign) (2 · 127 · 127).
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "common/dtype.h"
#include "common/quant_block.h"
#include "kernels/cpu/quantize_activations.h"
#include "kernels/cpu/simd/fixed_point_lanes.h"
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

// Q5_0/Q5_1: the four rows' d (and m) and their fifth bits (AddFifthBits), from the blocks at blk.
template <DType kType>
inline void ReadQ5Header(const uint8_t* blk, int64_t stride, QuadVec* lo, QuadVec* hi, __m128* d, __m128* m) {
  using Block = std::conditional_t<kType == DType::kQ5_0, BlockQ5_0, BlockQ5_1>;
  AddFifthBits(blk + offsetof(Block, qh), stride, lo, hi);
  if constexpr (kType == DType::kQ5_1) {
    static_assert(offsetof(Block, m) == offsetof(Block, d) + 2);
    Load4HalfPairs(blk + offsetof(Block, d), stride, d, m);
  } else {
    *d = Load4Half(blk + offsetof(Block, d), stride);
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
  __m256i start = _mm256_setzero_si256();  // −(lo_bias + hi_bias) (TokenLanes: decode batches)
};

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

// ---- Several tokens at once against a quad (quant_row_quads.h's QuadTokenRows) ----

// The shift of a type's bias in TokenBias (2^shift · Σa; < 0: none): the stored biases, Q8_0 through the sign
// trick.
template <DType kType>
inline constexpr int kTokenBiasShift = kBiasShift<kType>;

// The fewest tokens QuadTokenRows takes: two run faster through the 4 × 2 tiles here (SmolLM2 Q4_1 decode
// at 2 threads, batch 2: 302-310 tok/s tiles, 272 quads; batch 3: 375-382 against 372-385).
inline constexpr int64_t kQuadMinTokens = 3;

// A group of four tokens' 16 results as f32, element 4r + t being row r against token t: v[0] rows 0 and 1,
// v[1] rows 2 and 3.
struct GroupF {
  __m256 v[2];
};
inline GroupF operator*(GroupF a, GroupF b) { return {{_mm256_mul_ps(a.v[0], b.v[0]), _mm256_mul_ps(a.v[1], b.v[1])}}; }
inline GroupF operator+(GroupF a, GroupF b) { return {{_mm256_add_ps(a.v[0], b.v[0]), _mm256_add_ps(a.v[1], b.v[1])}}; }
inline GroupF Fma(GroupF a, GroupF b, GroupF c) {
  return {{_mm256_fmadd_ps(a.v[0], b.v[0], c.v[0]), _mm256_fmadd_ps(a.v[1], b.v[1], c.v[1])}};
}
inline GroupF ZeroGroup() { return {{_mm256_setzero_ps(), _mm256_setzero_ps()}}; }
inline void StoreGroup(GroupF g, float* v) {
  _mm256_storeu_ps(v, g.v[0]);
  _mm256_storeu_ps(v + 8, g.v[1]);
}
// Row r's value (element r of v) in each of its elements, 4r..4r+3.
inline GroupF RowsInGroups(__m128 v) {
  const __m256 wide = _mm256_castps128_ps256(v);
  return {{_mm256_permutevar8x32_ps(wide, _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1)),
           _mm256_permutevar8x32_ps(wide, _mm256_setr_epi32(2, 2, 2, 2, 3, 3, 3, 3))}};
}
// The four tokens' values (token t's in four[t]) in each row's elements.
inline GroupF TokensInGroups(const float* four) {
  const __m256 both = _mm256_broadcast_ps(reinterpret_cast<const __m128*>(four));
  return {{both, both}};
}

// The int64 sums of a group's 16 results (MatMulFixedPoint's): Add rounds terms already scaled by 2^32.
struct GroupFixed {
  void Add(GroupF terms) {
    for (int p = 0; p < 2; ++p) {
      v[2 * p] = _mm256_add_epi64(v[2 * p], RoundToFixed4(_mm256_castps256_ps128(terms.v[p])));
      v[2 * p + 1] = _mm256_add_epi64(v[2 * p + 1], RoundToFixed4(_mm256_extractf128_ps(terms.v[p], 1)));
    }
  }
  void Store(int64_t* out) const {
    for (int k = 0; k < 4; ++k) _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 4 * k), v[k]);
  }
  __m256i v[4] = {_mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256()};
};

// v in every 128-bit lane of QuadAct's vectors.
inline __m256i EveryLane(__m128i v) { return _mm256_broadcastsi128_si256(v); }

// The four rows' exact lanes of a block against one token, both halves added: a row's total is the sum of its
// 128-bit lane. The int16 pairs as in QuadTotals.
template <DType kType>
inline QuadVec TokenLanes(const QuadVec& lo, const QuadVec& hi, const QuadAct& a, const QuadVec& lo_scale,
                          const QuadVec& hi_scale) {
  QuadVec s;
  if constexpr (kType == DType::kQ8_0 || HasHalfScales(kType)) {
    const QuadVec l = QuadLanes<kType>(lo, a.lo, a.lo_bias, lo_scale);
    const QuadVec h = QuadLanes<kType>(hi, a.hi, a.hi_bias, hi_scale);
    for (int p = 0; p < 2; ++p) s.v[p] = _mm256_add_epi32(l.v[p], h.v[p]);
  } else {
    for (int p = 0; p < 2; ++p) {
      const __m256i pairs = _mm256_add_epi16(_mm256_maddubs_epi16(lo.v[p], a.lo), _mm256_maddubs_epi16(hi.v[p], a.hi));
      s.v[p] = _mm256_madd_epi16(pairs, _mm256_set1_epi16(1));
      if constexpr (kBiasShift<kType> >= 0) s.v[p] = _mm256_add_epi32(s.v[p], a.start);  // −bias · Σa
    }
  }
  return s;
}

// Four tokens' lanes → the group's 16 exact totals as f32 (below 2^24), a transposing tree per row pair.
inline GroupF TokenTotals(const QuadVec (&lanes)[4]) {
  GroupF g;
  for (int p = 0; p < 2; ++p) {
    const __m256i s0 = lanes[0].v[p], s1 = lanes[1].v[p], s2 = lanes[2].v[p], s3 = lanes[3].v[p];
    const __m256i a = _mm256_add_epi32(_mm256_unpacklo_epi32(s0, s1), _mm256_unpackhi_epi32(s0, s1));
    const __m256i b = _mm256_add_epi32(_mm256_unpacklo_epi32(s2, s3), _mm256_unpackhi_epi32(s2, s3));
    g.v[p] = _mm256_cvtepi32_ps(_mm256_add_epi32(_mm256_unpacklo_epi64(a, b), _mm256_unpackhi_epi64(a, b)));
  }
  return g;
}

}  // namespace tpserve::internal::TPSERVE_ISA_NS
