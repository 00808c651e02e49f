// Internal to kernels/cpu/simd: PortableExpF (kernels/cpu/portable_math.h) in each level's own copy, on
// the widest lanes of the level: ExpLanes is sixteen floats on AVX-512, eight on AVX2, one float on the
// portable level. Its steps are written out once, in GCC's vector operators and the level's fma (per lane,
// the scalar operation), on PortableExpF's constants (ExpFConstants), so every lane gives PortableExpF's bits
// and no level calls the shared inline function.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/cpu/portable_math.h"
#include "kernels/cpu/simd/intrinsics.h"

namespace tpserve::internal::TPSERVE_ISA_NS {

#if defined(__AVX512F__) && defined(__AVX512DQ__)
using ExpLanes = float __attribute__((vector_size(64)));
using ExpInts = int32_t __attribute__((vector_size(64)));
inline ExpLanes FmaLanes(ExpLanes a, ExpLanes b, ExpLanes c) { return _mm512_fmadd_ps(a, b, c); }
#elif defined(__AVX2__) && defined(__FMA__)
using ExpLanes = float __attribute__((vector_size(32)));
using ExpInts = int32_t __attribute__((vector_size(32)));
inline ExpLanes FmaLanes(ExpLanes a, ExpLanes b, ExpLanes c) { return _mm256_fmadd_ps(a, b, c); }
#else
using ExpLanes = float;
using ExpInts = int32_t;
inline float FmaLanes(float a, float b, float c) { return std::fma(a, b, c); }
#endif
inline constexpr int64_t kExpLanes = sizeof(ExpLanes) / sizeof(float);

// PortableExpF of every lane.
inline ExpLanes ExpOfLanes(ExpLanes x) {
  using C = ExpFConstants;
  const ExpLanes zero = ExpLanes{} + 0.0f;
  x = x > C::kMax ? zero + C::kMax : x;  // a NaN stays
  x = x < C::kMin ? zero + C::kMin : x;
  const ExpLanes shifted = FmaLanes(x, zero + C::kLog2e, zero + C::kShift);
  const ExpLanes kf = shifted - C::kShift;
  ExpLanes r = FmaLanes(kf, zero - C::kLn2Hi, x);
  r = FmaLanes(kf, zero - C::kLn2Lo, r);
  ExpLanes p = zero + C::kTaylor[0];
  for (int i = 1; i < 8; ++i) p = FmaLanes(p, r, zero + C::kTaylor[i]);
  const ExpInts k = __builtin_bit_cast(ExpInts, shifted) - __builtin_bit_cast(int32_t, C::kShift);
  const ExpInts k1 = k >> 1, k2 = k - k1;
  return (p * __builtin_bit_cast(ExpLanes, (k1 + 127) << 23)) * __builtin_bit_cast(ExpLanes, (k2 + 127) << 23);
}

}  // namespace tpserve::internal::TPSERVE_ISA_NS
