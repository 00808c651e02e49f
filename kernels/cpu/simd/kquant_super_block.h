// Internal to the super-block decode path of the K-quants (kquant_row_stream.h), both SIMD levels: the block
// types, the decode of Q4_K's and Q5_K's 12 packed scale bytes by two byte shuffles (SSSE3: both levels), and
// the terms a level's TermsOf (kquant_terms_avx512.h, kquant_terms_avx2.h) gives for the eight groups of
// one super-block.
#pragma once

#include <array>
#include <cstdint>
#include <type_traits>

#include "common/dtype.h"
#include "common/quant_block.h"
#include "kernels/cpu/quantize_activations.h"
#include "kernels/cpu/simd/intrinsics.h"
#include "kernels/cpu/simd/quant_quad_basics.h"

namespace tpserve::internal::TPSERVE_ISA_NS {

template <DType kType>
inline constexpr bool kKQuantStream = kType == DType::kQ4_K || kType == DType::kQ5_K || kType == DType::kQ6_K;

template <DType kType>
using KBlockOf = std::conditional_t<kType == DType::kQ4_K, BlockQ4_K,
                                    std::conditional_t<kType == DType::kQ5_K, BlockQ5_K, BlockQ6_K>>;

// A super-block's eight groups in the level's totals order (TotalsGroup): their exact totals, each group's
// d · scale · sums_scale · d_a (Q6_K: d · sums_scale · d_a) and (Q4_K, Q5_K) −dmin · min · sums_scale · Σa,
// each product in the order FloatSums and FixedSums take it (sums_scale: 1, or the fixed point's 2^32).
struct KGroupTerms {
  __m256 totals, scale, offset;
};

// Byte-shuffle and mask tables that decode Q4_K's and Q5_K's 12 packed bytes (KQuantScaleMin) into the 8 scales
// (bytes 0..7) and 8 minimums (8..15) of the groups in a given order: byte = (A & lo) | ((A >> 4) & hi) |
// ((B >> 6) << 4), A and B picked from the 12 bytes by a_index and b_index (−1: zero).
struct KScaleTables {
  std::array<int8_t, 16> a_index, b_index, lo, hi;
};

// group_at[i]: the group whose scale goes to byte i (and minimum to byte 8 + i).
constexpr KScaleTables MakeKScaleTables(const std::array<int, 8>& group_at) {
  KScaleTables k{};
  for (int p = 0; p < 16; ++p) {
    const bool min = p >= 8;
    const int j = group_at[p % 8];
    k.a_index[p] = static_cast<int8_t>(j < 4 && !min ? j : j + 4);
    k.b_index[p] = static_cast<int8_t>(j < 4 ? -1 : min ? j : j - 4);
    k.lo[p] = static_cast<int8_t>(j < 4 ? 0x3f : min ? 0 : 0x0f);
    k.hi[p] = static_cast<int8_t>(j >= 4 && min ? 0x0f : 0);
  }
  return k;
}

inline __m128i LoadBytes16(const void* p) { return _mm_loadu_si128(static_cast<const __m128i*>(p)); }

// The 16 bytes (8 scales, 8 minimums) of the 12 packed bytes at `packed` (16 readable), as `tables` orders them.
inline __m128i KScaleMinBytes(const uint8_t* packed, const KScaleTables& tables) {
  const __m128i bytes = LoadBytes16(packed);
  const __m128i pick_a = _mm_shuffle_epi8(bytes, LoadBytes16(tables.a_index.data()));
  const __m128i pick_b = _mm_shuffle_epi8(bytes, LoadBytes16(tables.b_index.data()));
  const __m128i low = _mm_or_si128(_mm_and_si128(pick_a, LoadBytes16(tables.lo.data())),
                                   _mm_and_si128(_mm_srli_epi16(pick_a, 4), LoadBytes16(tables.hi.data())));
  return _mm_or_si128(low, _mm_and_si128(_mm_srli_epi16(pick_b, 2), _mm_set1_epi8(0x30)));
}

// Q6_K's bias term of half-group `half` (16 values) of the super-block's activations a[0..7]: 32 · Σa (its q
// are stored as w + 32).
inline int32_t Q6HalfGroupBias(const BlockQ8Act* a, int half) {
  int32_t sum = 0;
  for (int i = 0; i < 16; ++i) sum += a[half / 2].qs[16 * (half % 2) + i];
  return sum * (1 << kBiasShift<DType::kQ6_K>);
}

}  // namespace tpserve::internal::TPSERVE_ISA_NS
