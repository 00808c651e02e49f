// Internal to kquant_row_stream.h, the AVX2 level: the terms of one super-block of Q4_K, Q5_K and Q6_K against
// one token. Its 128 (Q6_K: 192) value bytes come in four (six) full loads and give each of its eight groups
// one vector of 32 values (group s in v[s]); a maddubs and a madd with ones per group give each group's two
// half-groups four lanes each (no pair saturates: values of at most 63, 2 · 63 · 127 < 2^15), two levels of
// hadd the 16 half-group sums (HalfSums' order), and the scales and products run on the eight groups, in order,
// in one vector each: DecodeSuperBlock once per super-block, TermsOf once per token that reads it.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "common/dtype.h"
#include "kernels/cpu/quantize_activations.h"
#include "kernels/cpu/simd/fixed_point_lanes.h"
#include "kernels/cpu/simd/kquant_super_block.h"
#include "kernels/cpu/simd/quant_quad_basics.h"

namespace tpserve::internal::TPSERVE_ISA_NS {

// The group of element i of a step's totals: groups in order here.
template <DType>
constexpr int TotalsGroup(int i) {
  return i;
}

// The half-group (16 values: Q6_K's scale unit) of element e of half-sum vector h: group 4h + e % 4, its first
// (e < 4) or second half.
constexpr int HalfGroupOf(int h, int e) { return 2 * (4 * h + e % 4) + e / 4; }

// One super-block of the token as the stream reads it.
struct KStreamAct {
  __m256i qs[8];    // group s's 32 activations
  __m256i bias[2];  // Q6_K: 32 · Σa of each half-group, in HalfSums' order (HalfGroupOf)
  __m256 d, sum;    // d_a and Σa of the groups
};

template <DType kType>
void PrepareKStreamActs(const BlockQ8Act* act, int64_t supers, KStreamAct* out) {
  for (int64_t j = 0; j < supers; ++j) {
    const BlockQ8Act* a = act + 8 * j;
    alignas(32) int32_t bias[2][8];
    alignas(32) float d[8], sum[8];
    for (int s = 0; s < 8; ++s) {
      out[j].qs[s] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[s].qs));
      d[s] = a[s].d;
      sum[s] = a[s].sum;
    }
    if constexpr (kType == DType::kQ6_K) {
      for (int h = 0; h < 2; ++h) {
        for (int e = 0; e < 8; ++e) bias[h][e] = Q6HalfGroupBias(a, HalfGroupOf(h, e));
        out[j].bias[h] = _mm256_load_si256(reinterpret_cast<const __m256i*>(bias[h]));
      }
    }
    out[j].d = _mm256_load_ps(d);
    out[j].sum = _mm256_load_ps(sum);
  }
}

// The eight groups' values of one super-block, group s in v[s] (unsigned: Q6_K's q without its bias of 32).
template <DType kType>
[[gnu::always_inline]] inline void GroupValues(const uint8_t* blk, __m256i (&v)[8]) {
  const auto load = [&](size_t offset) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + offset)); };
  const __m256i low4 = _mm256_set1_epi8(0x0f);
  if constexpr (kType == DType::kQ6_K) {
    // Half h: ql's 64 bytes hold groups 4h and 4h + 1 in their low nibbles, 4h + 2 and 4h + 3 in their high;
    // qh's 32 bytes their two high bits, pairs 0..3, moved to bits 4 and 5 by 16-bit shifts that stay in
    // each byte.
    const __m256i bits45 = _mm256_set1_epi8(0x30);
    for (int h = 0; h < 2; ++h) {
      const __m256i ql0 = load(offsetof(BlockQ6_K, ql) + 64 * h), ql1 = load(offsetof(BlockQ6_K, ql) + 64 * h + 32);
      const __m256i qh = load(offsetof(BlockQ6_K, qh) + 32 * h);
      const auto high = [&](__m256i shifted) { return _mm256_and_si256(shifted, bits45); };
      v[4 * h] = _mm256_or_si256(_mm256_and_si256(ql0, low4), high(_mm256_slli_epi16(qh, 4)));
      v[4 * h + 1] = _mm256_or_si256(_mm256_and_si256(ql1, low4), high(_mm256_slli_epi16(qh, 2)));
      v[4 * h + 2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), low4), high(qh));
      v[4 * h + 3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), low4), high(_mm256_srli_epi16(qh, 2)));
    }
  } else {
    using Block = KBlockOf<kType>;
    for (int i = 0; i < 4; ++i) {  // groups 2i and 2i + 1 in the low and high nibbles of 32 bytes
      const __m256i packed = load(offsetof(Block, qs) + 32 * i);
      v[2 * i] = _mm256_and_si256(packed, low4);
      v[2 * i + 1] = _mm256_and_si256(_mm256_srli_epi16(packed, 4), low4);
    }
    if constexpr (kType == DType::kQ5_K) {  // bit s of qh byte i: the fifth bit of group s's value i
      const __m256i qh = load(offsetof(BlockQ5_K, qh));
      const __m256i fifth = _mm256_set1_epi8(0x10);
      for (int s = 0; s < 8; ++s) {  // bit s to bit 4, within each byte
        const __m256i moved = s <= 4 ? _mm256_slli_epi16(qh, 4 - s) : _mm256_srli_epi16(qh, s - 4);
        v[s] = _mm256_or_si256(v[s], _mm256_and_si256(moved, fifth));
      }
    }
  }
}

// One super-block's weights decoded for every token that reads it: the eight groups' values (GroupValues) and
// the products that involve no activation: Q4_K and Q5_K d · scale · sums_scale and −(dmin · min) · sums_scale
// of the groups in order; Q6_K its int8 scales in HalfSums' order and d · sums_scale.
struct KWeights {
  __m256i v[8];
  __m256i q6_scale[2];
  __m256 scale, offset;
};

template <DType kType>
[[gnu::always_inline]] inline KWeights DecodeSuperBlock(const uint8_t* blk, float scale_by) {
  const __m256 sums_scale = _mm256_set1_ps(scale_by);
  KWeights k;
  GroupValues<kType>(blk, k.v);
  if constexpr (kType == DType::kQ6_K) {
    static constexpr auto kOrder = [] {
      std::array<int8_t, 16> order{};
      for (int h = 0; h < 2; ++h) {
        for (int e = 0; e < 8; ++e) order[8 * h + e] = static_cast<int8_t>(HalfGroupOf(h, e));
      }
      return order;
    }();
    const __m128i scales =
        _mm_shuffle_epi8(LoadBytes16(blk + offsetof(BlockQ6_K, scales)), LoadBytes16(kOrder.data()));
    k.q6_scale[0] = _mm256_cvtepi8_epi32(scales);
    k.q6_scale[1] = _mm256_cvtepi8_epi32(_mm_srli_si128(scales, 8));
    k.scale = _mm256_mul_ps(_mm256_set1_ps(_cvtsh_ss(LoadU16(blk + offsetof(BlockQ6_K, d)))), sums_scale);
    k.offset = _mm256_setzero_ps();
  } else {
    using Block = KBlockOf<kType>;
    static constexpr KScaleTables kTables = MakeKScaleTables({0, 1, 2, 3, 4, 5, 6, 7});
    const __m128i bytes = KScaleMinBytes(blk + offsetof(Block, scales), kTables);
    const __m128 d_dmin = _mm_cvtph_ps(_mm_cvtsi32_si128(LoadI32(blk)));
    const __m256 d = _mm256_broadcastss_ps(d_dmin), dmin = _mm256_broadcastss_ps(_mm_movehdup_ps(d_dmin));
    const auto widen = [](__m128i eight) { return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(eight)); };
    const __m256 scale = _mm256_mul_ps(d, widen(bytes));
    const __m256 min = _mm256_xor_ps(_mm256_mul_ps(dmin, widen(_mm_srli_si128(bytes, 8))), _mm256_set1_ps(-0.0f));
    k.scale = _mm256_mul_ps(scale, sums_scale);
    k.offset = _mm256_mul_ps(min, sums_scale);  // min: −(dmin · min)
  }
  return k;
}

// The super-block's terms against one token's activations.
template <DType kType>
[[gnu::always_inline]] inline KGroupTerms TermsOf(const KWeights& k, const KStreamAct& a) {
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i dots[8];  // group s's first half-group in lanes 0-3, its second in 4-7
  for (int s = 0; s < 8; ++s) dots[s] = _mm256_madd_epi16(_mm256_maddubs_epi16(k.v[s], a.qs[s]), ones);
  // HalfSums: vector h holds the first halves of groups 4h..4h + 3 in its low 128 bits, their second halves in
  // its high.
  __m256i half[2];
  for (int h = 0; h < 2; ++h) {
    half[h] = _mm256_hadd_epi32(_mm256_hadd_epi32(dots[4 * h], dots[4 * h + 1]),
                                _mm256_hadd_epi32(dots[4 * h + 2], dots[4 * h + 3]));
    if constexpr (kType == DType::kQ6_K) {
      half[h] = _mm256_mullo_epi32(_mm256_sub_epi32(half[h], a.bias[h]), k.q6_scale[h]);
    }
  }
  const __m256 totals = _mm256_cvtepi32_ps(_mm256_add_epi32(_mm256_permute2x128_si256(half[0], half[1], 0x20),
                                                            _mm256_permute2x128_si256(half[0], half[1], 0x31)));
  if constexpr (kType == DType::kQ6_K) return {totals, _mm256_mul_ps(k.scale, a.d), _mm256_setzero_ps()};
  return {totals, _mm256_mul_ps(k.scale, a.d), _mm256_mul_ps(k.offset, a.sum)};
}

// A row's fixed-point terms, eight at a time, as int64 (nearest even) added in any order.
class KFixedSum {
 public:
  void Add(__m256 terms) {
    lo_ = _mm256_add_epi64(lo_, RoundToFixed4(_mm256_castps256_ps128(terms)));
    hi_ = _mm256_add_epi64(hi_, RoundToFixed4(_mm256_extractf128_ps(terms, 1)));
  }
  int64_t Total() const {
    alignas(32) int64_t v[4];
    _mm256_store_si256(reinterpret_cast<__m256i*>(v), _mm256_add_epi64(lo_, hi_));
    return WrapAdd(WrapAdd(v[0], v[1]), WrapAdd(v[2], v[3]));
  }

 private:
  __m256i lo_ = _mm256_setzero_si256(), hi_ = _mm256_setzero_si256();
};

}  // namespace tpserve::internal::TPSERVE_ISA_NS
