// Internal to quant_row_quads.h, the AVX-512 (VNNI) level: four weight rows in one zmm per half of a
// block (row r in 128-bit lane r), and the operations the four-row reader and reductions need on them.
// One VNNI dot per half gives the four rows' canonical integer lanes.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/dtype.h"
#include "common/quant_block.h"
#include "kernels/cpu/quantize_activations.h"
#include "kernels/cpu/simd/intrinsics.h"
#include "kernels/cpu/simd/quant_quad_basics.h"

namespace tpserve::internal::TPSERVE_ISA_NS {

// Four rows' 16 bytes, row r in 128-bit lane r.
using QuadVec = __m512i;

inline QuadVec ZeroQuad() { return _mm512_setzero_si512(); }
inline QuadVec Or(QuadVec a, QuadVec b) { return _mm512_or_si512(a, b); }
inline QuadVec ShiftLeft4(QuadVec v) { return _mm512_slli_epi16(v, 4); }

inline __m512i Load4x16(const uint8_t* p, int64_t stride) {
  const auto at = [&](int r) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + r * stride)); };
  __m512i v = _mm512_castsi128_si512(at(0));
  v = _mm512_inserti32x4(v, at(1), 1);
  v = _mm512_inserti32x4(v, at(2), 2);
  return _mm512_inserti32x4(v, at(3), 3);
}

// (v >> shift) & mask per byte.
inline __m512i ShiftMask(__m512i v, int shift, int mask) {
  return _mm512_and_si512(_mm512_srl_epi16(v, _mm_cvtsi32_si128(shift)), _mm512_set1_epi8(static_cast<char>(mask)));
}

// The permutation that fills lane group r (four 32-bit elements) with element r.
inline __m512i RowGroups() { return _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3); }

// 0x10 added to the bytes of lo and hi (which hold 0..15) whose fifth bit is set, lane r of `rows` holding row
// r's 32-bit qh from byte kQh on in both 64-bit halves. Bit j of qh is value j of the row: bits 0..15 go to lo's
// lane r, 16..31 to hi's. Byte j of a lane takes qh's byte j / 8 (lo: 0 and 1, hi: 2 and 3), then tests bit
// j % 8. A masked add per half, where an or of a masked move took two operations.
template <int64_t kQh>
inline void AddFifthBits(__m512i rows, __m512i* lo, __m512i* hi) {
  constexpr int64_t kEvery = 0x0101010101010101;
  const __m512i lo_bytes = _mm512_set4_epi64((kQh + 1) * kEvery, kQh * kEvery, (kQh + 1) * kEvery, kQh * kEvery);
  const __m512i hi_bytes =
      _mm512_set4_epi64((kQh + 3) * kEvery, (kQh + 2) * kEvery, (kQh + 3) * kEvery, (kQh + 2) * kEvery);
  const __m512i bit = _mm512_set1_epi64(static_cast<int64_t>(0x8040201008040201ull));
  const __m512i fifth = _mm512_set1_epi8(0x10);
  *lo = _mm512_mask_add_epi8(*lo, _mm512_test_epi8_mask(_mm512_shuffle_epi8(rows, lo_bytes), bit), *lo, fifth);
  *hi = _mm512_mask_add_epi8(*hi, _mm512_test_epi8_mask(_mm512_shuffle_epi8(rows, hi_bytes), bit), *hi, fifth);
}

// Q5_0/Q5_1: four rows' blocks at blk, stride bytes apart: the rows' d (and m) and their fifth bits.
// Q5_0 reads its first 8 bytes (d, then qh) with one 64-bit load per row, where d and qh had taken 16- and
// 32-bit loads and inserts of their own: 19 -> 14 instructions for a quad's scales and fifth bits (counted
// from the intrinsics), and SmolLM2 Q5_0 decode at one thread 1.04-1.10x. Q5_1 (d, m, qh) went 0.89-0.95x so
// (its d and m already came in one 32-bit load per row) and keeps its loads.
template <DType kType>
inline void ReadQ5Header(const uint8_t* blk, int64_t stride, __m512i* lo, __m512i* hi, __m128* d, __m128* m) {
  if constexpr (kType == DType::kQ5_0) {
    static_assert(offsetof(BlockQ5_0, d) == 0 && offsetof(BlockQ5_0, qh) == 2);
    // Built by loads and inserts: GCC gave a set of four loads a trip through the stack, whose vector load
    // missed store forwarding.
    const auto pair = [&](const uint8_t* p) {
      return _mm_insert_epi64(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)), LoadI64(p + stride), 1);
    };
    const __m256i heads = _mm256_inserti128_si256(_mm256_castsi128_si256(pair(blk)), pair(blk + 2 * stride), 1);
    *d = _mm_cvtph_ps(_mm256_cvtepi64_epi16(heads));
    const __m512i idx = _mm512_setr_epi64(0, 0, 1, 1, 2, 2, 3, 3);  // row r's header in both halves of lane r
    AddFifthBits<offsetof(BlockQ5_0, qh)>(_mm512_permutexvar_epi64(idx, _mm512_castsi256_si512(heads)), lo, hi);
  } else {
    static_assert(kType == DType::kQ5_1 && offsetof(BlockQ5_1, m) == offsetof(BlockQ5_1, d) + 2);
    Load4HalfPairs(blk + offsetof(BlockQ5_1, d), stride, d, m);
    const uint8_t* qh = blk + offsetof(BlockQ5_1, qh);
    const __m128i bits =
        _mm_setr_epi32(LoadI32(qh), LoadI32(qh + stride), LoadI32(qh + 2 * stride), LoadI32(qh + 3 * stride));
    AddFifthBits<0>(_mm512_permutexvar_epi32(RowGroups(), _mm512_castsi128_si512(bits)), lo, hi);
  }
}

// Q6_K: a super-block's int8 scales of 16 values, row r's in lane r; each row's half h, sign-extended
// into the four int32 of its lane group (byte h moved to the top byte of each, then shifted down).
inline QuadVec HalfScale(QuadVec scales, int h) {
  return _mm512_srai_epi32(_mm512_shuffle_epi8(scales, _mm512_set1_epi32(static_cast<int>((h << 24) | 0x808080))), 24);
}

// The activation block's halves, each in all four lanes, and (biased types) bias · the sum of each 4 values.
struct QuadAct {
  __m512i lo, hi;
  __m512i lo_bias = _mm512_setzero_si512(), hi_bias = _mm512_setzero_si512();
  __m512i start = _mm512_setzero_si512();  // −(lo_bias + hi_bias) (TokenLanes: decode batches)
};

// The exact integer lanes of one half: Σ_{j<4} w·a over the four values of each lane (times the half's
// integer scale for Q6_K). A biased type's lane is Σ q·a − bias·Σa; Q8_0's signed w goes through
// |w| · (a with w's sign).
template <DType kType>
inline __m512i QuadLanes(__m512i w, __m512i a, __m512i bias_sum, __m512i scale) {
  const __m512i zero = _mm512_setzero_si512();
  __m512i dot;
  if constexpr (kType == DType::kQ8_0) {
    dot = _mm512_dpbusd_epi32(zero, _mm512_abs_epi8(w), _mm512_mask_sub_epi8(a, _mm512_movepi8_mask(w), zero, a));
  } else {
    dot = _mm512_dpbusd_epi32(zero, w, a);
  }
  if constexpr (kBiasShift<kType> >= 0) dot = _mm512_sub_epi32(dot, bias_sum);
  if constexpr (HasHalfScales(kType)) dot = _mm512_mullo_epi32(dot, scale);
  (void)bias_sum;
  (void)scale;
  return dot;
}

// The four rows' exact integer totals of their 8 lanes (lanes 0..3 in `lo`, 4..7 in `hi`), rows in order.
inline __m128i RowTotals(__m512i lo, __m512i hi) {
  const __m512i s = _mm512_add_epi32(lo, hi);
  const __m512i pairs = _mm512_add_epi32(s, _mm512_shuffle_epi32(s, _MM_PERM_BADC));
  const __m512i total = _mm512_add_epi32(pairs, _mm512_shuffle_epi32(pairs, _MM_PERM_CDAB));
  return _mm512_castsi512_si128(
      _mm512_permutexvar_epi32(_mm512_setr_epi32(0, 4, 8, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0), total));
}

// The four rows' exact block totals, rows in order.
template <DType kType>
inline __m128i QuadTotals(__m512i lo, __m512i hi, const QuadAct& a, __m512i lo_scale, __m512i hi_scale) {
  return RowTotals(QuadLanes<kType>(lo, a.lo, a.lo_bias, lo_scale), QuadLanes<kType>(hi, a.hi, a.hi_bias, hi_scale));
}

// ---- Several tokens at once against a quad (quant_row_quads.h's QuadTokenRows) ----

// The shift of a type's bias in TokenBias (2^shift · Σa; < 0: none): the stored biases, and Q8_0's 128, by
// which TokenLanes reads its signed w as unsigned w + 128 (VNNI sums in int32, so 255 · 127 cannot saturate).
template <DType kType>
inline constexpr int kTokenBiasShift = kType == DType::kQ8_0 ? 7 : kBiasShift<kType>;

// The fewest tokens QuadTokenRows takes (batch 2: 315-335 tok/s through the tiles, 354-381 through the quads,
// SmolLM2 Q4_1 decode at 2 threads).
inline constexpr int64_t kQuadMinTokens = 2;

// A group of four tokens' 16 results as f32, element 4r + t being row r against token t.
struct GroupF {
  __m512 v;
};
inline GroupF operator*(GroupF a, GroupF b) { return {_mm512_mul_ps(a.v, b.v)}; }
inline GroupF operator+(GroupF a, GroupF b) { return {_mm512_add_ps(a.v, b.v)}; }
inline GroupF Fma(GroupF a, GroupF b, GroupF c) { return {_mm512_fmadd_ps(a.v, b.v, c.v)}; }
inline GroupF ZeroGroup() { return {_mm512_setzero_ps()}; }
inline void StoreGroup(GroupF g, float* v) { _mm512_storeu_ps(v, g.v); }
// Row r's value (element r of v) in each of its elements, 4r..4r+3.
inline GroupF RowsInGroups(__m128 v) { return {_mm512_permutexvar_ps(RowGroups(), _mm512_castps128_ps512(v))}; }
// The four tokens' values (token t's in four[t]) in each row's elements.
inline GroupF TokensInGroups(const float* four) { return {_mm512_broadcast_f32x4(_mm_loadu_ps(four))}; }

// x in every element.
inline GroupF EveryElement(float x) { return {_mm512_set1_ps(x)}; }
// Four quads' row values (quad t's in v[t], row r in element r) in a group's order: element 4r + t is v[t]'s r.
inline GroupF QuadsInGroups(const __m128 (&v)[4]) {
  __m512 all = _mm512_castps128_ps512(v[0]);  // element 4t + r
  all = _mm512_insertf32x4(all, v[1], 1);
  all = _mm512_insertf32x4(all, v[2], 2);
  all = _mm512_insertf32x4(all, v[3], 3);
  return {_mm512_permutexvar_ps(_mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15), all)};
}

// The int64 sums of a group's 16 results (MatMulFixedPoint's): Add rounds terms already scaled by 2^32.
struct GroupFixed {
  void Add(GroupF terms) {
    v[0] = _mm512_add_epi64(v[0], _mm512_cvtps_epi64(_mm512_castps512_ps256(terms.v)));
    v[1] = _mm512_add_epi64(v[1], _mm512_cvtps_epi64(_mm512_extractf32x8_ps(terms.v, 1)));
  }
  void Store(int64_t* out) const {
    _mm512_storeu_si512(out, v[0]);
    _mm512_storeu_si512(out + 8, v[1]);
  }
  __m512i v[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()};
};

// v in every 128-bit lane of QuadAct's vectors.
inline __m512i EveryLane(__m128i v) { return _mm512_broadcast_i32x4(v); }

// The four rows' exact lanes of a block against one token, both halves added: row r's total is the sum of
// its 128-bit lane. Without half scales the two halves' dots chain from −bias · Σa (a.start): two VNNI dots
// per token, where QuadLanes takes a subtraction per half and Q8_0's sign trick two operations more.
template <DType kType>
inline QuadVec TokenLanes(const QuadVec& lo, const QuadVec& hi, const QuadAct& a, const QuadVec& lo_scale,
                          const QuadVec& hi_scale) {
  if constexpr (HasHalfScales(kType)) {
    return _mm512_add_epi32(QuadLanes<kType>(lo, a.lo, a.lo_bias, lo_scale),
                            QuadLanes<kType>(hi, a.hi, a.hi_bias, hi_scale));
  } else {
    (void)lo_scale;
    (void)hi_scale;
    const __m512i start = kTokenBiasShift<kType> >= 0 ? a.start : _mm512_setzero_si512();
    if constexpr (kType == DType::kQ8_0) {  // w + 128 as unsigned
      const __m512i flip = _mm512_set1_epi8(-128);
      return _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(start, _mm512_xor_si512(lo, flip), a.lo),
                                 _mm512_xor_si512(hi, flip), a.hi);
    }
    return _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(start, lo, a.lo), hi, a.hi);
  }
}

// Four vectors' 128-bit lanes summed in one transposing tree: element 4r + t of the result is the sum of lane r
// of lanes[t] (exact int32).
inline __m512i LaneSums(const QuadVec (&lanes)[4]) {
  const __m512i s0 = lanes[0], s1 = lanes[1], s2 = lanes[2], s3 = lanes[3];
  const __m512i a = _mm512_add_epi32(_mm512_unpacklo_epi32(s0, s1), _mm512_unpackhi_epi32(s0, s1));
  const __m512i b = _mm512_add_epi32(_mm512_unpacklo_epi32(s2, s3), _mm512_unpackhi_epi32(s2, s3));
  return _mm512_add_epi32(_mm512_unpacklo_epi64(a, b), _mm512_unpackhi_epi64(a, b));
}

// Four tokens' lanes → the group's 16 exact totals as f32 (below 2^24): one transposing tree for the four,
// where RowTotals takes six operations each.
inline GroupF TokenTotals(const QuadVec (&lanes)[4]) { return {_mm512_cvtepi32_ps(LaneSums(lanes))}; }

}  // namespace tpserve::internal::TPSERVE_ISA_NS
