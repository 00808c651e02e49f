// Internal to the fixed-point matmul tiles (kernels/cpu/matmul_fixed_point.h): the rounding of
// scaled f32 terms to int64 (one, four at a time), and the float tiles' int64 totals of eight outputs.
// Every path rounds to nearest, ties to even, so AVX-512, AVX2 and portable builds add the same
// integers (the AVX2 magic-number rounding is exact below 2^51, far above kFixedPointMaxMagnitude · 2^32
// = 2^50; tests/kernels/isa_equality_test.cc compares the three). Integer sums are order-free. Sums wrap instead of overflowing (only possible outside the documented range).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

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
// Four terms times `scale` (1 or a power of two: exact) → four int64, nearest even (the default MXCSR
// mode). AVX2 has no f32 → int64 conversion: it widens to f64 and adds 1.5·2^52 (an fma where there is a
// scale), which rounds into the low mantissa bits for |v| < 2^51.
inline __m256i RoundToFixed4(__m128 terms, double scale = 1.0) {
#if defined(__AVX512DQ__) && defined(__AVX512VL__)
  if (scale != 1.0) terms = _mm_mul_ps(terms, _mm_set1_ps(static_cast<float>(scale)));
  return _mm256_cvtps_epi64(terms);
#else
  const __m256d magic = _mm256_set1_pd(0x1.8p52);
  const __m256d wide = _mm256_cvtps_pd(terms);
  const __m256d shifted =
      scale == 1.0 ? _mm256_add_pd(wide, magic) : _mm256_fmadd_pd(wide, _mm256_set1_pd(scale), magic);
  return _mm256_sub_epi64(_mm256_castpd_si256(shifted), _mm256_castpd_si256(magic));
#endif
}

// The int64 totals of up to eight outputs of the float tiles, fed each chunk's sums S of the eight
// (lane o: output o) unscaled: output o adds RNE(S · 2^32). The eight share one conversion (the costly
// step on AVX2, which has no f32 → int64 instruction). Scaling by 2^32 is exact in f32 and f64 alike.
class FixedOctet {
 public:
  void Add(__m256 sums) {
#if defined(__AVX512F__) && defined(__AVX512DQ__)
    const __m256 scaled = _mm256_mul_ps(sums, _mm256_set1_ps(0x1p32f));
    lanes_ = _mm512_add_epi64(lanes_, _mm512_cvt_roundps_epi64(scaled, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
#else
    lanes_[0] = _mm256_add_epi64(lanes_[0], RoundToFixed4(_mm256_castps256_ps128(sums), 0x1p32));
    lanes_[1] = _mm256_add_epi64(lanes_[1], RoundToFixed4(_mm256_extractf128_ps(sums, 1), 0x1p32));
#endif
  }
  int64_t Total(int o) const {
    int64_t v[8];
    Store(v);
    return v[o];
  }
  void Store(int64_t (&totals)[8]) const { std::memcpy(totals, &lanes_, sizeof totals); }

 private:
#if defined(__AVX512F__) && defined(__AVX512DQ__)
  __m512i lanes_ = _mm512_setzero_si512();
#else
  __m256i lanes_[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
#endif
};
#endif

}  // namespace tpserve::internal::TPSERVE_ISA_NS
