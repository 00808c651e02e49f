// Internal to kquant_row_stream.h, the AVX-512 level: the terms of one super-block of Q4_K, Q5_K and Q6_K
// against one token. Its 128 (Q6_K: 192) value bytes come in two (three) full loads, its eight groups in the
// halves of four vectors (GroupIn), four VNNI dots give their lanes, one transposing tree (LaneSums) the 16
// half-group sums, and the scales and products run on all eight groups in one vector: DecodeSuperBlock once per
// super-block, TermsOf once per token that reads it.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "common/dtype.h"
#include "kernels/cpu/quantize_activations.h"
#include "kernels/cpu/simd/kquant_super_block.h"
#include "kernels/cpu/simd/quad_lanes_avx512.h"

namespace tpserve::internal::TPSERVE_ISA_NS {

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
      for (int e = 0; e < 16; ++e) bias[e] = Q6HalfGroupBias(a, HalfGroupOf<kType>(e));
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

// One super-block's weights decoded for every token that reads it: the eight groups' values in the halves of
// four vectors (GroupIn) and the products that involve no activation: Q4_K and Q5_K [d · scale × 8,
// −(dmin · min) × 8] · sums_scale in totals order; Q6_K its int8 scales in LaneSums' order and d · sums_scale.
struct KWeights {
  __m512i v[4];
  __m512i q6_scale;
  __m512 scaled;
};

template <DType kType>
[[gnu::always_inline]] inline KWeights DecodeSuperBlock(const uint8_t* blk, float scale_by) {
  using Block = KBlockOf<kType>;
  const __m512 sums_scale = _mm512_set1_ps(scale_by);
  const __m512i low4 = _mm512_set1_epi8(0x0f);
  KWeights k;
  __m512i* v = k.v;
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
    static constexpr auto kOrder = [] {
      std::array<int8_t, 16> order{};
      for (int e = 0; e < 16; ++e) order[e] = static_cast<int8_t>(HalfGroupOf<kType>(e));
      return order;
    }();
    k.q6_scale = _mm512_cvtepi8_epi32(
        _mm_shuffle_epi8(LoadBytes16(blk + offsetof(BlockQ6_K, scales)), LoadBytes16(kOrder.data())));
    k.scaled = _mm512_mul_ps(_mm512_set1_ps(_cvtsh_ss(LoadU16(blk + offsetof(BlockQ6_K, d)))), sums_scale);
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
    static constexpr KScaleTables kTables = MakeKScaleTables(
        {TotalsGroup<kType>(0), TotalsGroup<kType>(1), TotalsGroup<kType>(2), TotalsGroup<kType>(3),
         TotalsGroup<kType>(4), TotalsGroup<kType>(5), TotalsGroup<kType>(6), TotalsGroup<kType>(7)});
    const __m128i bytes = KScaleMinBytes(blk + offsetof(Block, scales), kTables);
    // [d × 8, dmin × 8] · [scales, minimums], the minimums' products negated: d · scale and −(dmin · min).
    const __m128 d_dmin = _mm_cvtph_ps(_mm_cvtsi32_si128(LoadI32(blk)));
    const __m512 both = _mm512_permutexvar_ps(_mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1),
                                              _mm512_castps128_ps512(d_dmin));
    __m512 scaled = _mm512_mul_ps(both, _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(bytes)));
    scaled = _mm512_mask_xor_ps(scaled, 0xff00, scaled, _mm512_set1_ps(-0.0f));
    k.scaled = _mm512_mul_ps(scaled, sums_scale);
  }
  return k;
}

// The super-block's terms against one token's activations.
template <DType kType>
[[gnu::always_inline]] inline KGroupTerms TermsOf(const KWeights& k, const KStreamAct& a) {
  __m512i dots[4];
  for (int t = 0; t < 4; ++t) dots[t] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), k.v[t], a.qs[t]);
  __m512i half_sums = LaneSums(dots);
  if constexpr (kType == DType::kQ6_K) {
    half_sums = _mm512_mullo_epi32(_mm512_sub_epi32(half_sums, a.bias), k.q6_scale);
    const __m256 scale_d = _mm256_mul_ps(_mm512_castps512_ps256(k.scaled), _mm512_castps512_ps256(a.scales));
    return {_mm256_cvtepi32_ps(GroupTotals(half_sums)), scale_d, _mm256_setzero_ps()};
  } else {
    const __m512 products = _mm512_mul_ps(k.scaled, a.scales);
    return {_mm256_cvtepi32_ps(GroupTotals(half_sums)), _mm512_castps512_ps256(products),
            _mm512_extractf32x8_ps(products, 1)};
  }
}

// A row's fixed-point terms, eight at a time, as int64 (nearest even) added in any order.
class KFixedSum {
 public:
  void Add(__m256 terms) { sum_ = _mm512_add_epi64(sum_, _mm512_cvtps_epi64(terms)); }
  int64_t Total() const { return _mm512_reduce_add_epi64(sum_); }

 private:
  __m512i sum_ = _mm512_setzero_si512();
};

}  // namespace tpserve::internal::TPSERVE_ISA_NS
