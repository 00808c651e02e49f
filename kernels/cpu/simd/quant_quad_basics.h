// Internal to quant_row_quads.h and its level headers (quad_lanes_avx512.h, quad_lanes_avx2.h): what the
// four-row decode path needs the same on every level that has it.
#pragma once

#include <cstdint>
#include <cstring>

#include "common/dtype.h"
#include "kernels/cpu/simd/intrinsics.h"

namespace tpserve::internal::TPSERVE_ISA_NS {

// The types read four rows at a time (the others, Q2_K and Q3_K, keep the 8-lane tiles).
constexpr bool HasRowQuads(DType type) {
  switch (type) {
    case DType::kQ8_0: case DType::kQ4_0: case DType::kQ4_1: case DType::kQ5_0: case DType::kQ5_1:
    case DType::kQ4_K: case DType::kQ5_K: case DType::kQ6_K: return true;
    default: return false;
  }
}

// The signed types stored as unsigned q with a bias (w = q − bias): their lanes are Σ q·a − bias·Σa.
// Q8_0 (stored signed) has 0 here and goes through the sign trick instead.
template <DType kType>
constexpr int kBiasShift = kType == DType::kQ4_0 ? 3 : kType == DType::kQ5_0 ? 4 : kType == DType::kQ6_K ? 5 : -1;

// A token's bias sums of one activation block, QuadAct's lanes for decode batches: 2^kShift · Σ of each 4
// values of the first half (lo) and of the second (hi), and start = −(lo + hi), where both halves' dots may
// start from (all zero for kShift < 0: the unbiased types).
struct TokenBias {
  __m128i lo = _mm_setzero_si128(), hi = _mm_setzero_si128(), start = _mm_setzero_si128();
};

template <int kShift>
inline TokenBias TokenBiasOf(const int8_t* qs) {
  TokenBias bias;
  if constexpr (kShift >= 0) {
    const __m128i ones8 = _mm_set1_epi8(1), ones16 = _mm_set1_epi16(1);
    auto sums = [&](const int8_t* p) {  // Σ of each 4 values: exact in the int16 pairs (|a| ≤ 127)
      const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
      return _mm_slli_epi32(_mm_madd_epi16(_mm_maddubs_epi16(ones8, a), ones16), kShift);
    };
    bias.lo = sums(qs);
    bias.hi = sums(qs + 16);
    bias.start = _mm_sub_epi32(_mm_setzero_si128(), _mm_add_epi32(bias.lo, bias.hi));
  }
  return bias;
}

inline uint16_t LoadU16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

inline int32_t LoadI32(const uint8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

inline int64_t LoadI64(const uint8_t* p) {
  int64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

// Four f16 scales stride bytes apart.
inline __m128 Load4Half(const uint8_t* p, int64_t stride) {
  __m128i h = _mm_cvtsi32_si128(LoadU16(p));
  h = _mm_insert_epi16(h, LoadU16(p + stride), 1);
  h = _mm_insert_epi16(h, LoadU16(p + 2 * stride), 2);
  h = _mm_insert_epi16(h, LoadU16(p + 3 * stride), 3);
  return _mm_cvtph_ps(h);
}

// Four rows' f16 pairs (an offset type's d and m), row r's in 32-bit element r: the firsts and the seconds.
inline void SplitHalfPairs(__m128i pairs, __m128* first, __m128* second) {
  const __m256 both = _mm256_cvtph_ps(pairs);  // first0 second0 first1 second1 ...
  const __m256 split = _mm256_permutevar8x32_ps(both, _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7));
  *first = _mm256_castps256_ps128(split);
  *second = _mm256_extractf128_ps(split, 1);
}

// Four rows' adjacent f16 pairs, stride bytes apart: one 32-bit load per row and one conversion, where two
// Load4Half take eight 16-bit loads and six inserts.
inline void Load4HalfPairs(const uint8_t* p, int64_t stride, __m128* first, __m128* second) {
  SplitHalfPairs(_mm_setr_epi32(LoadI32(p), LoadI32(p + stride), LoadI32(p + 2 * stride), LoadI32(p + 3 * stride)),
                 first, second);
}

}  // namespace tpserve::internal::TPSERVE_ISA_NS
