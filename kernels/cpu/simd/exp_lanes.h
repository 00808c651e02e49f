// Internal to kernels/cpu/simd: PortableExpF (kernels/cpu/portable_math.h) in each level's own copy, on
// the widest lanes of the level: ExpLanes is eight floats on AVX-512 (worked in 512-bit doubles), four on
// AVX2, one float on the portable level. Its IEEE double steps are written out once, in GCC's vector
// operators (per lane, the scalar operation), so every lane gives PortableExpF's bits and no level calls
// the shared inline function.
#pragma once

#include <cstdint>

namespace tpserve::internal::TPSERVE_ISA_NS {

#if defined(__AVX512F__) && defined(__AVX512DQ__)
using ExpLanes = float __attribute__((vector_size(32)));
using ExpDoubles = double __attribute__((vector_size(64)));
using ExpInts = int64_t __attribute__((vector_size(64)));
#elif defined(__AVX2__)
using ExpLanes = float __attribute__((vector_size(16)));
using ExpDoubles = double __attribute__((vector_size(32)));
using ExpInts = int64_t __attribute__((vector_size(32)));
#else
using ExpLanes = float;
using ExpDoubles = double;
using ExpInts = int64_t;
#endif
#if defined(__AVX2__)
inline ExpDoubles Widen(ExpLanes x) { return __builtin_convertvector(x, ExpDoubles); }
inline ExpLanes Narrow(ExpDoubles x) { return __builtin_convertvector(x, ExpLanes); }  // nearest even
#else
inline double Widen(float x) { return x; }
inline float Narrow(double x) { return static_cast<float>(x); }
#endif
inline constexpr int64_t kExpLanes = sizeof(ExpLanes) / sizeof(float);

// PortableExpF of every lane.
inline ExpLanes ExpOfLanes(ExpLanes x) {
  constexpr double kInvLn2 = 1.44269504088896338700e+00;
  constexpr double kLn2 = 6.93147180559945286227e-01;
  constexpr double kShift = 0x1.8p52;  // adding it rounds to an integer held in the low mantissa bits
  constexpr double kTaylor[8] = {1.0 / 5040.0, 1.0 / 720.0, 1.0 / 120.0, 1.0 / 24.0, 1.0 / 6.0, 0.5, 1.0, 1.0};
  ExpDoubles xd = Widen(x);
  const ExpDoubles high = ExpDoubles{} + 89.0, low = ExpDoubles{} - 104.0;
  xd = xd > high ? high : xd;  // a NaN stays
  xd = xd < low ? low : xd;
  const ExpDoubles shifted = xd * kInvLn2 + kShift;
  const ExpDoubles kd = shifted - kShift;
  const ExpDoubles r = xd - kd * kLn2;
  ExpDoubles p = ExpDoubles{} + kTaylor[0];
  for (int i = 1; i < 8; ++i) p = p * r + kTaylor[i];
  const ExpInts k = __builtin_bit_cast(ExpInts, shifted) - __builtin_bit_cast(int64_t, kShift);
  const ExpDoubles scale = __builtin_bit_cast(ExpDoubles, (k + 1023) << 52);
  return Narrow(p * scale);
}

}  // namespace tpserve::internal::TPSERVE_ISA_NS
