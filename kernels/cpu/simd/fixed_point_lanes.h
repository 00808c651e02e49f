// Internal to the fixed-point matmul tiles (kernels/cpu/matmul_fixed_point.h): the rounding of
// scaled f32 terms to int64 (one, four at a time), and the float panels' int64 sums of eight outputs.
// Every path rounds to nearest, ties to even, so AVX-512, AVX2 and portable builds add the same
// integers (the AVX2 magic-number rounding is exact below 2^51, far above kFixedPointMaxMagnitude · 2^32
// = 2^50; tests/kernels/isa_equality_test.cc compares the three). Integer sums are order-free. Sums wrap instead of overflowing (only possible outside the documented range).
#pragma once

#include <cmath>
#include <cstdint>

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#define TPSERVE_FIXED_POINT_AVX2 1
#include "kernels/cpu/simd/intrinsics.h"
#endif

namespace tpserve::internal::TPSERVE_ISA_NS {

// RNE(v) for a term already scaled by 2^32. Outside ±2^62 (or NaN) the value is unspecified.
inline int64_t ToFixed(float v) {
  if (!(std::fabs(v) < 0x1p62f)) return INT64_MIN;
  return static_cast<int64_t>(std::nearbyint(v));
}

// Wrapping addition (signed overflow would be undefined; it happens only outside the range).
inline int64_t WrapAdd(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
}

#if TPSERVE_FIXED_POINT_AVX2
// Four terms (already scaled by 2^32) → four int64, nearest even (the default MXCSR mode). AVX2 has no
// f32 → int64 conversion: it widens to f64 and adds 1.5·2^52, which rounds into the low mantissa bits for
// |v| < 2^51.
inline __m256i RoundToFixed4(__m128 terms) {
#if defined(__AVX512DQ__) && defined(__AVX512VL__)
  return _mm256_cvtps_epi64(terms);
#else
  const __m256d magic = _mm256_set1_pd(0x1.8p52);
  const __m256d shifted = _mm256_add_pd(_mm256_cvtps_pd(terms), magic);
  return _mm256_sub_epi64(_mm256_castpd_si256(shifted), _mm256_castpd_si256(magic));
#endif
}

// The AVX2 float panels' int64 sums in memory: sums[i] += RNE(s[i] · 2^32) + kFixedTermBias for eight
// unscaled f32 terms s. AVX2 adds each term to 1.5·2^20 in f64, whose unit in the last place is 2^-32: the
// sum's bits are kFixedTermBias (those of 1.5·2^20) plus RNE(s · 2^32), exactly, for |s| < 2^19. The caller
// takes one kFixedTermBias off per term added, once at the end. sums: any alignment. AVX-512DQ converts f32
// to int64 directly (panel_rows_avx512.h): no bias there.
#if defined(__AVX512F__) && defined(__AVX512DQ__)
inline constexpr uint64_t kFixedTermBias = 0;
#else
inline constexpr uint64_t kFixedTermBias = 0x4138000000000000;
inline void AddFixedTerms8(__m256 s, int64_t* sums) {
  const __m256d bias = _mm256_set1_pd(0x1.8p20);
  const __m256d lo = _mm256_add_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(s)), bias);
  const __m256d hi = _mm256_add_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(s, 1)), bias);
  auto* d = reinterpret_cast<__m256i*>(sums);
  _mm256_storeu_si256(d, _mm256_add_epi64(_mm256_loadu_si256(d), _mm256_castpd_si256(lo)));
  _mm256_storeu_si256(d + 1, _mm256_add_epi64(_mm256_loadu_si256(d + 1), _mm256_castpd_si256(hi)));
}
#endif
#endif

}  // namespace tpserve::internal::TPSERVE_ISA_NS
