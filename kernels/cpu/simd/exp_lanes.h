// Internal to kernels/cpu/simd: PortableExpF (kernels/cpu/portable_math.h) in each level's own copy,
// its IEEE double steps written out so that no level calls the shared inline function: Exp8 on eight
// lanes (AVX-512), Exp4 on four (AVX2), Exp1 on one (portable). Every lane gives PortableExpF's bits.
#pragma once

#include <cstdint>

#include "kernels/cpu/simd/intrinsics.h"

namespace tpserve::internal::TPSERVE_ISA_NS {

inline constexpr double kInvLn2 = 1.44269504088896338700e+00;
inline constexpr double kLn2 = 6.93147180559945286227e-01;
inline constexpr double kShift = 0x1.8p52;  // adding it rounds to an integer held in the low mantissa bits
inline constexpr double kExpHigh = 89.0, kExpLow = -104.0;
inline constexpr double kTaylor[8] = {1.0 / 5040.0, 1.0 / 720.0, 1.0 / 120.0, 1.0 / 24.0, 1.0 / 6.0, 0.5, 1.0, 1.0};

#if defined(__AVX512F__) && defined(__AVX512DQ__)
// PortableExpF on eight lanes: Exp4's steps in 512-bit doubles.
inline __m256 Exp8(__m256 x) {
  __m512d xd = _mm512_cvtps_pd(x);
  xd = _mm512_min_pd(_mm512_set1_pd(kExpHigh), xd);
  xd = _mm512_max_pd(_mm512_set1_pd(kExpLow), xd);
  const __m512d shifted = _mm512_add_pd(_mm512_mul_pd(xd, _mm512_set1_pd(kInvLn2)), _mm512_set1_pd(kShift));
  const __m512d kd = _mm512_sub_pd(shifted, _mm512_set1_pd(kShift));
  const __m512d r = _mm512_sub_pd(xd, _mm512_mul_pd(kd, _mm512_set1_pd(kLn2)));
  __m512d p = _mm512_set1_pd(kTaylor[0]);
  for (int i = 1; i < 8; ++i) p = _mm512_add_pd(_mm512_mul_pd(p, r), _mm512_set1_pd(kTaylor[i]));
  const __m512i k = _mm512_sub_epi64(_mm512_castpd_si512(shifted), _mm512_castpd_si512(_mm512_set1_pd(kShift)));
  const __m512d scale = _mm512_castsi512_pd(_mm512_slli_epi64(_mm512_add_epi64(k, _mm512_set1_epi64(1023)), 52));
  return _mm512_cvtpd_ps(_mm512_mul_pd(p, scale));
}
#endif

#if defined(__AVX2__)
// PortableExpF on four lanes.
inline __m128 Exp4(__m128 x) {
  __m256d xd = _mm256_cvtps_pd(x);
  xd = _mm256_min_pd(_mm256_set1_pd(kExpHigh), xd);  // x > 89 ? 89 : x (a NaN stays)
  xd = _mm256_max_pd(_mm256_set1_pd(kExpLow), xd);   // x < -104 ? -104 : x
  const __m256d shifted = _mm256_add_pd(_mm256_mul_pd(xd, _mm256_set1_pd(kInvLn2)), _mm256_set1_pd(kShift));
  const __m256d kd = _mm256_sub_pd(shifted, _mm256_set1_pd(kShift));
  const __m256d r = _mm256_sub_pd(xd, _mm256_mul_pd(kd, _mm256_set1_pd(kLn2)));
  __m256d p = _mm256_set1_pd(kTaylor[0]);
  for (int i = 1; i < 8; ++i) p = _mm256_add_pd(_mm256_mul_pd(p, r), _mm256_set1_pd(kTaylor[i]));
  const __m256i k = _mm256_sub_epi64(_mm256_castpd_si256(shifted), _mm256_castpd_si256(_mm256_set1_pd(kShift)));
  const __m256d scale = _mm256_castsi256_pd(_mm256_slli_epi64(_mm256_add_epi64(k, _mm256_set1_epi64x(1023)), 52));
  return _mm256_cvtpd_ps(_mm256_mul_pd(p, scale));
}
#endif

// The widest exp of the level, as a GCC vector of floats (its operators act per lane): ExpLanes.
#if defined(__AVX512F__) && defined(__AVX512DQ__)
using ExpLanes = __m256;
inline ExpLanes ExpOfLanes(ExpLanes x) { return Exp8(x); }
#elif defined(__AVX2__)
using ExpLanes = __m128;
inline ExpLanes ExpOfLanes(ExpLanes x) { return Exp4(x); }
#else
inline float Exp1(float x) {
  double xd = static_cast<double>(x);
  xd = xd > kExpHigh ? kExpHigh : xd;
  xd = xd < kExpLow ? kExpLow : xd;
  const double shifted = xd * kInvLn2 + kShift;
  const double kd = shifted - kShift;
  const double r = xd - kd * kLn2;
  double p = kTaylor[0];
  for (int i = 1; i < 8; ++i) p = p * r + kTaylor[i];
  const int64_t k = __builtin_bit_cast(int64_t, shifted) - __builtin_bit_cast(int64_t, kShift);
  const double scale = __builtin_bit_cast(double, static_cast<uint64_t>(k + 1023) << 52);
  return static_cast<float>(p * scale);
}
#endif

}  // namespace tpserve::internal::TPSERVE_ISA_NS
