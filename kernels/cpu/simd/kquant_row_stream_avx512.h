// Internal to quant_row_quads.h, the AVX-512 level: one token (decode) against the rows of Q4_K, Q5_K and
// Q6_K a whole 256-value super-block per step. The row quads (QuadReader) spend a step on each 32-value group
// of four rows: two 128-bit gathers, the group's scales decoded every eighth step and kept in memory, four-lane
// products. Here a super-block's 128 (Q6_K: 192) value bytes come in two (three) full loads, its eight groups
// in the halves of four vectors (GroupIn), four VNNI dots give their lanes, one transposing tree (LaneSums) the
// 16 half-group sums, and the scales and products run on all eight groups in one vector (GroupTermsOf).
// - MatMulFixedPoint's sums (the row-parallel layers: attention output, FFN down) read one row at a time, in
//   address order, one stream, as quant_row_stream_avx512.h reads the 32-value types: per group the exact
//   integer total, the f32 products (d · scale) · 2^32 · d_a and (−dmin · min) · 2^32 · Σa (Q6_K: d · 2^32 ·
//   d_a), the term rounded to nearest even; int64 terms add in any order.
// - MatMul's float sums chain an fma per group in group order, a chain along the row: four rows at a time,
//   their terms transposed into lanes (KQuantQuadFloat), so that the four chains run side by side.
// One thread, us per call, quads -> this, in the cache (bench/README.md, "K-quants by the super-block"):
// fixed point Q4_K 1536 x 576 29.4-29.9 -> 13.9-14.3, Q6_K 35.9-36.9 -> 14.6-15.2; float Q4_K 27.1 -> 15.5-15.7,
// Q6_K 33.4 -> 16.0-16.1. The ISA equality test holds both to the portable level bit for bit.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "common/dtype.h"
#include "kernels/cpu/matmul_fixed_point.h"
#include "kernels/cpu/quantize_activations.h"
#include "kernels/cpu/simd/quad_lanes_avx512.h"
#include "kernels/cpu/simd/tile_prefetch.h"

namespace tpserve::internal::TPSERVE_ISA_NS {

template <DType kType>
inline constexpr bool kKQuantStream = kType == DType::kQ4_K || kType == DType::kQ5_K || kType == DType::kQ6_K;

template <DType kType>
using KBlockOf = std::conditional_t<kType == DType::kQ4_K, BlockQ4_K,
                                    std::conditional_t<kType == DType::kQ5_K, BlockQ5_K, BlockQ6_K>>;

// The group (32 values) in half `half` (256 bits) of value vector t: Q4_K and Q5_K keep groups 2i and 2i + 1 in
// the low and high nibbles of the same 32 bytes, so vector t holds the low (t even) or high nibbles of 64 bytes;
// Q6_K keeps groups 4h + k and 4h + k + 1 in the low (k = 0) or high (k = 2) nibbles of ql's 64 bytes of half h.
template <DType kType>
constexpr int GroupIn(int t, int half) {
  if constexpr (kType == DType::kQ6_K) return 2 * t + half;
  return 4 * (t / 2) + t % 2 + 2 * half;
}

// The group of element i (0..7) of a step's totals: LaneSums' lanes 0-1 and 2-3 of each vector added.
template <DType kType>
constexpr int TotalsGroup(int i) {
  return i < 4 ? GroupIn<kType>(i, 0) : GroupIn<kType>(i - 4, 1);
}

// The element of the totals order that holds group s.
template <DType kType>
constexpr int TotalsElement(int s) {
  for (int i = 0; i < 8; ++i) {
    if (TotalsGroup<kType>(i) == s) return i;
  }
  return -1;
}

// The half-group (16 values: Q6_K's scale unit) of LaneSums' element 4r + t.
template <DType kType>
constexpr int HalfGroupOf(int element) {
  const int r = element / 4, t = element % 4;
  return 2 * GroupIn<kType>(t, r / 2) + r % 2;
}

// One super-block of the token as the stream reads it.
struct KStreamAct {
  __m512i qs[4];  // vector t: the activations of groups GroupIn(t, 0) and GroupIn(t, 1), in its halves
  __m512i bias;   // Q6_K: 32 · Σa of each half-group, in LaneSums' order (HalfGroupOf)
  __m512 scales;  // elements 0..7: d_a of the groups in totals order (TotalsGroup); 8..15: their Σa
};

template <DType kType>
void PrepareKStreamActs(const BlockQ8Act* act, int64_t supers, KStreamAct* out) {
  for (int64_t j = 0; j < supers; ++j) {
    const BlockQ8Act* a = act + 8 * j;
    alignas(64) int8_t qs[4][64];
    alignas(64) int32_t bias[16];
    alignas(64) float scales[16];
    for (int t = 0; t < 4; ++t) {
      std::memcpy(qs[t], a[GroupIn<kType>(t, 0)].qs, 32);
      std::memcpy(qs[t] + 32, a[GroupIn<kType>(t, 1)].qs, 32);
    }
    if constexpr (kType == DType::kQ6_K) {
      for (int e = 0; e < 16; ++e) {
        const int half = HalfGroupOf<kType>(e);
        int32_t sum = 0;
        for (int i = 0; i < 16; ++i) sum += a[half / 2].qs[16 * (half % 2) + i];
        bias[e] = sum * (1 << kBiasShift<kType>);
      }
    }
    for (int i = 0; i < 8; ++i) {
      scales[i] = a[TotalsGroup<kType>(i)].d;
      scales[8 + i] = a[TotalsGroup<kType>(i)].sum;
    }
    for (int t = 0; t < 4; ++t) out[j].qs[t] = _mm512_load_si512(qs[t]);
    if constexpr (kType == DType::kQ6_K) out[j].bias = _mm512_load_si512(bias);
    out[j].scales = _mm512_load_ps(scales);
  }
}

// Byte-shuffle and mask tables that decode Q4_K's and Q5_K's 12 packed bytes (KQuantScaleMin) into the 8 scales
// (bytes 0..7) and 8 minimums (8..15) of the groups in totals order: byte = (A & lo) | ((A >> 4) & hi) |
// ((B >> 6) << 4), A and B picked from the 12 bytes by a_index and b_index (−1: zero).
struct KScaleTables {
  std::array<int8_t, 16> a_index, b_index, lo, hi;
};

template <DType kType>
constexpr KScaleTables MakeKScaleTables() {
  KScaleTables k{};
  for (int p = 0; p < 16; ++p) {
    const bool min = p >= 8;
    const int j = TotalsGroup<kType>(p % 8);
    k.a_index[p] = static_cast<int8_t>(j < 4 && !min ? j : j + 4);
    k.b_index[p] = static_cast<int8_t>(j < 4 ? -1 : min ? j : j - 4);
    k.lo[p] = static_cast<int8_t>(j < 4 ? 0x3f : min ? 0 : 0x0f);
    k.hi[p] = static_cast<int8_t>(j >= 4 && min ? 0x0f : 0);
  }
  return k;
}

inline __m128i LoadBytes16(const void* p) { return _mm_loadu_si128(static_cast<const __m128i*>(p)); }

// 16-bit lanes: lo in the low 256 bits, hi in the high.
inline __m512i Halves16(int16_t lo, int16_t hi) {
  return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi16(lo)), _mm256_set1_epi16(hi), 1);
}

// The eight groups' totals (exact int32) in totals order from the 16 half-group sums of LaneSums.
inline __m256i GroupTotals(__m512i half_sums) {
  const __m512i swapped = _mm512_shuffle_i32x4(half_sums, half_sums, _MM_SHUFFLE(2, 3, 0, 1));
  const __m512i pairs = _mm512_add_epi32(half_sums, swapped);
  return _mm512_castsi512_si256(_mm512_shuffle_i64x2(pairs, pairs, _MM_SHUFFLE(2, 0, 2, 0)));
}

// A super-block's eight groups in totals order (TotalsGroup): their exact totals, each group's d · scale
// · sums_scale · d_a (Q6_K: d · sums_scale · d_a) and (Q4_K, Q5_K) −dmin · min · sums_scale · Σa, each product
// in the order FloatSums and FixedSums take it (sums_scale: 1, or the fixed point's 2^32).
struct KGroupTerms {
  __m256 totals, scale, offset;
};

template <DType kType>
[[gnu::always_inline]] inline KGroupTerms GroupTermsOf(const uint8_t* blk, const KStreamAct& a, __m512 sums_scale) {
  using Block = KBlockOf<kType>;
  const __m512i low4 = _mm512_set1_epi8(0x0f);
  __m512i v[4];
  if constexpr (kType == DType::kQ6_K) {
    const __m512i qh = _mm512_loadu_si512(blk + offsetof(BlockQ6_K, qh));
    const __m512i bits45 = _mm512_set1_epi8(0x30);
    // Group 4h + k's two high bits are bits 2k, 2k + 1 of qh's half h, moved to bits 4 and 5.
    const __m512i first = Halves16(4, 2), second = Halves16(0, 2);  // shifts left, then right
    for (int h = 0; h < 2; ++h) {
      const __m512i ql = _mm512_loadu_si512(blk + offsetof(BlockQ6_K, ql) + 64 * h);
      const __m512i high = h == 0 ? _mm512_shuffle_i64x2(qh, qh, _MM_SHUFFLE(1, 0, 1, 0))
                                  : _mm512_shuffle_i64x2(qh, qh, _MM_SHUFFLE(3, 2, 3, 2));
      // 0xf8: a | (b & c) (bits 4 and 5 from the shifted qh).
      v[2 * h] = _mm512_ternarylogic_epi32(_mm512_and_si512(ql, low4), _mm512_sllv_epi16(high, first), bits45, 0xf8);
      v[2 * h + 1] = _mm512_ternarylogic_epi32(_mm512_and_si512(_mm512_srli_epi16(ql, 4), low4),
                                               _mm512_srlv_epi16(high, second), bits45, 0xf8);
    }
  } else {
    const uint8_t* qs = blk + offsetof(Block, qs);
    for (int i = 0; i < 2; ++i) {
      const __m512i packed = _mm512_loadu_si512(qs + 64 * i);
      v[2 * i] = _mm512_and_si512(packed, low4);
      v[2 * i + 1] = _mm512_and_si512(_mm512_srli_epi16(packed, 4), low4);
    }
    if constexpr (kType == DType::kQ5_K) {  // bit s of qh byte i: the fifth bit of group s's value i
      const auto* bits = reinterpret_cast<const __m256i*>(blk + offsetof(BlockQ5_K, qh));
      const __m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256(bits));
      for (int t = 0; t < 4; ++t) {
        const __m512i bit = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi8(1 << GroupIn<kType>(t, 0))),
                                               _mm256_set1_epi8(static_cast<char>(1 << GroupIn<kType>(t, 1))), 1);
        v[t] = _mm512_mask_add_epi8(v[t], _mm512_test_epi8_mask(qh, bit), v[t], _mm512_set1_epi8(0x10));
      }
    }
  }
  __m512i dots[4];
  for (int t = 0; t < 4; ++t) dots[t] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), v[t], a.qs[t]);
  __m512i half_sums = LaneSums(dots);
  if constexpr (kType == DType::kQ6_K) {
    static constexpr auto kOrder = [] {
      std::array<int8_t, 16> order{};
      for (int e = 0; e < 16; ++e) order[e] = static_cast<int8_t>(HalfGroupOf<kType>(e));
      return order;
    }();
    const __m512i scale = _mm512_cvtepi8_epi32(_mm_shuffle_epi8(LoadBytes16(blk + offsetof(BlockQ6_K, scales)),
                                                                LoadBytes16(kOrder.data())));
    half_sums = _mm512_mullo_epi32(_mm512_sub_epi32(half_sums, a.bias), scale);
    const __m256 d = _mm256_set1_ps(_cvtsh_ss(LoadU16(blk + offsetof(BlockQ6_K, d))));
    const __m256 scale_d = _mm256_mul_ps(_mm256_mul_ps(d, _mm512_castps512_ps256(sums_scale)),
                                         _mm512_castps512_ps256(a.scales));
    return {_mm256_cvtepi32_ps(GroupTotals(half_sums)), scale_d, _mm256_setzero_ps()};
  } else {
    static constexpr KScaleTables kTables = MakeKScaleTables<kType>();
    const __m128i packed = LoadBytes16(blk + offsetof(Block, scales));
    const __m128i pick_a = _mm_shuffle_epi8(packed, LoadBytes16(kTables.a_index.data()));
    const __m128i pick_b = _mm_shuffle_epi8(packed, LoadBytes16(kTables.b_index.data()));
    const __m128i low = _mm_or_si128(_mm_and_si128(pick_a, LoadBytes16(kTables.lo.data())),
                                     _mm_and_si128(_mm_srli_epi16(pick_a, 4), LoadBytes16(kTables.hi.data())));
    const __m128i bytes = _mm_or_si128(low, _mm_and_si128(_mm_srli_epi16(pick_b, 2), _mm_set1_epi8(0x30)));
    // [d × 8, dmin × 8] · [scales, minimums], the minimums' products negated: d · scale and −(dmin · min).
    const __m128 d_dmin = _mm_cvtph_ps(_mm_cvtsi32_si128(LoadI32(blk)));
    const __m512 both = _mm512_permutexvar_ps(_mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1),
                                              _mm512_castps128_ps512(d_dmin));
    __m512 scaled = _mm512_mul_ps(both, _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(bytes)));
    scaled = _mm512_mask_xor_ps(scaled, 0xff00, scaled, _mm512_set1_ps(-0.0f));
    const __m512 products = _mm512_mul_ps(_mm512_mul_ps(scaled, sums_scale), a.scales);
    return {_mm256_cvtepi32_ps(GroupTotals(half_sums)), _mm512_castps512_ps256(products),
            _mm512_extractf32x8_ps(products, 1)};
  }
}

// One row's fixed-point sum over its super-blocks.
template <DType kType>
int64_t KQuantRowSum(const uint8_t* row, const KStreamAct* acts, int64_t supers) {
  const __m512 sums_scale = _mm512_set1_ps(kFixedPointScale);
  __m512i fixed = _mm512_setzero_si512();
  for (int64_t j = 0; j < supers; ++j) {
    const uint8_t* blk = row + j * static_cast<int64_t>(sizeof(KBlockOf<kType>));
    PrefetchStreamAhead(blk, sizeof(KBlockOf<kType>));
    const KGroupTerms g = GroupTermsOf<kType>(blk, acts[j], sums_scale);
    __m256 terms = _mm256_mul_ps(g.totals, g.scale);
    if constexpr (kType != DType::kQ6_K) terms = _mm256_add_ps(terms, g.offset);
    fixed = _mm512_add_epi64(fixed, _mm512_cvtps_epi64(terms));
  }
  return _mm512_reduce_add_epi64(fixed);
}

// Four rows' float sums (MatMul's), row r in lane r: per group in order, acc = fma(total, scale, acc) and
// (Q4_K, Q5_K) acc_min += offset, as FloatSums of four rows; a super-block's four rows' terms are transposed
// into group vectors first (element i of row r's vectors to lane r of vector i).
template <DType kType>
void KQuantQuadFloat(const uint8_t* w, int64_t row_bytes, const KStreamAct* acts, int64_t supers, float* y) {
  const __m512 one = _mm512_set1_ps(1.0f);
  __m128 acc = _mm_setzero_ps(), acc_min = _mm_setzero_ps();
  TilePrefetch<sizeof(KBlockOf<kType>), 4, true> prefetch(w, row_bytes);
  // Element i of four rows' vectors (row r in v[r]) as lane r of out[i].
  const auto transpose = [](const __m256 (&v)[4], __m128 (&out)[8]) {
    const __m256 lo01 = _mm256_unpacklo_ps(v[0], v[1]), hi01 = _mm256_unpackhi_ps(v[0], v[1]);
    const __m256 lo23 = _mm256_unpacklo_ps(v[2], v[3]), hi23 = _mm256_unpackhi_ps(v[2], v[3]);
    const __m256 e0 = _mm256_shuffle_ps(lo01, lo23, _MM_SHUFFLE(1, 0, 1, 0));  // elements 0 and 4
    const __m256 e1 = _mm256_shuffle_ps(lo01, lo23, _MM_SHUFFLE(3, 2, 3, 2));  // 1 and 5
    const __m256 e2 = _mm256_shuffle_ps(hi01, hi23, _MM_SHUFFLE(1, 0, 1, 0));  // 2 and 6
    const __m256 e3 = _mm256_shuffle_ps(hi01, hi23, _MM_SHUFFLE(3, 2, 3, 2));  // 3 and 7
    const __m256 e[4] = {e0, e1, e2, e3};
    for (int i = 0; i < 4; ++i) {
      out[i] = _mm256_castps256_ps128(e[i]);
      out[4 + i] = _mm256_extractf128_ps(e[i], 1);
    }
  };
  for (int64_t j = 0; j < supers; ++j) {
    prefetch.At(j * 256);
    __m256 totals[4], scale[4], offset[4];
    for (int r = 0; r < 4; ++r) {
      const KGroupTerms g =
          GroupTermsOf<kType>(w + r * row_bytes + j * static_cast<int64_t>(sizeof(KBlockOf<kType>)), acts[j], one);
      totals[r] = g.totals;
      scale[r] = g.scale;
      offset[r] = g.offset;
    }
    __m128 t[8], c[8], o[8];
    transpose(totals, t);
    transpose(scale, c);
    if constexpr (kType != DType::kQ6_K) transpose(offset, o);
    for (int s = 0; s < 8; ++s) {  // group s is element i of the totals order
      const int i = TotalsElement<kType>(s);
      acc = _mm_fmadd_ps(t[i], c[i], acc);
      if constexpr (kType != DType::kQ6_K) acc_min = _mm_add_ps(acc_min, o[i]);
    }
  }
  _mm_storeu_ps(y, _mm_add_ps(acc, acc_min));
}

// RowsFn's work for one token: the fixed-point sums every row, in address order; the float sums every whole
// quad of rows (the last num_rows % 4 rows are left to the tiles).
template <DType kType, class Out>
int64_t KQuantRowStream(const uint8_t* w, int64_t row_bytes, int64_t num_rows, const BlockQ8Act* act,
                        int64_t num_blocks, Out* y) {
  const int64_t supers = num_blocks / 8;  // K-quant rows hold whole super-blocks
  thread_local std::vector<KStreamAct> acts;  // [cols / 256], reused across calls
  if (static_cast<int64_t>(acts.size()) < supers) acts.resize(supers);
  PrepareKStreamActs<kType>(act, supers, acts.data());
  if constexpr (std::is_same_v<Out, float>) {
    const int64_t quads = num_rows / 4 * 4;
    for (int64_t r = 0; r < quads; r += 4) {
      KQuantQuadFloat<kType>(w + r * row_bytes, row_bytes, acts.data(), supers, y + r);
    }
    return quads;
  } else {
    for (int64_t r = 0; r < num_rows; ++r) y[r] = KQuantRowSum<kType>(w + r * row_bytes, acts.data(), supers);
    return num_rows;
  }
}

}  // namespace tpserve::internal::TPSERVE_ISA_NS
