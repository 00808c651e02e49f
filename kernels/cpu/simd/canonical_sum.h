// Internal to kernels/cpu/simd: the fixed fold trees that end every f32 lane reduction, written
// once for each register width, so that a 16-lane AVX-512 accumulator, two 8-lane AVX2
// accumulators and 16 scalars fold in the same order:
//   Fold16(a) = Fold8(b) with b[i] = a[i] + a[i + 8];
//   Fold8(a)  = (s[0] + s[2]) + (s[1] + s[3]) with s[i] = a[i] + a[i + 4].
// (Not _mm512_reduce_add_ps: its order is the compiler's choice.)
#pragma once

#include "kernels/cpu/simd/intrinsics.h"

namespace tpserve::internal::TPSERVE_ISA_NS {

inline float Fold8(const float a[8]) {
  float s[4];
  for (int i = 0; i < 4; ++i) s[i] = a[i] + a[i + 4];
  return (s[0] + s[2]) + (s[1] + s[3]);
}

inline float Fold16(const float a[16]) {
  float b[8];
  for (int i = 0; i < 8; ++i) b[i] = a[i] + a[i + 8];
  return Fold8(b);
}

#if defined(__AVX2__)
inline float Fold8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));  // s[i] = a[i] + a[i+4]
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));                                          // s[0]+s[2], s[1]+s[3]
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
// Lanes 0..7 in lo, 8..15 in hi.
inline float Fold16(__m256 lo, __m256 hi) { return Fold8(_mm256_add_ps(lo, hi)); }
#endif

#if defined(__AVX512F__) && defined(__AVX512DQ__)
inline float Fold16(__m512 v) { return Fold16(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1)); }
#endif

}  // namespace tpserve::internal::TPSERVE_ISA_NS
