// Internal to kernels/cpu/simd: PortableExpF (kernels/cpu/portable_math.h) in each level's own copy, on
// the widest lanes of the level: ExpLanes is sixteen floats on AVX-512, eight on AVX2, one float on the
// portable level. Its steps are written out once, in GCC's vector operators and the level's fma (per lane,
// the scalar operation), so every lane gives PortableExpF's bits and no level calls the shared inline
// function.
#pragma once

#include <cmath>
#include <cstdint>

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
  constexpr float kLog2e = 0x1.715476p+0f;
  constexpr float kShift = 0x1.8p23f;
  constexpr float kLn2Hi = 0x1.62e430p-1f, kLn2Lo = -0x1.05c610p-29f;
  constexpr float kTaylor[8] = {1.0f / 5040.0f, 1.0f / 720.0f, 1.0f / 120.0f, 1.0f / 24.0f,
                                1.0f / 6.0f,    0.5f,           1.0f,           1.0f};
  const ExpLanes zero = ExpLanes{} + 0.0f;
  x = x > 89.0f ? zero + 89.0f : x;  // a NaN stays
  x = x < -104.0f ? zero - 104.0f : x;
  const ExpLanes shifted = FmaLanes(x, zero + kLog2e, zero + kShift);
  const ExpLanes kf = shifted - kShift;
  ExpLanes r = FmaLanes(kf, zero - kLn2Hi, x);
  r = FmaLanes(kf, zero - kLn2Lo, r);
  ExpLanes p = zero + kTaylor[0];
  for (int i = 1; i < 8; ++i) p = FmaLanes(p, r, zero + kTaylor[i]);
  const ExpInts k = __builtin_bit_cast(ExpInts, shifted) - __builtin_bit_cast(int32_t, kShift);
  const ExpInts k1 = k >> 1, k2 = k - k1;
  return (p * __builtin_bit_cast(ExpLanes, (k1 + 127) << 23)) * __builtin_bit_cast(ExpLanes, (k2 + 127) << 23);
}

}  // namespace tpserve::internal::TPSERVE_ISA_NS
