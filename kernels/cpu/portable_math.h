// exp, log, sin and cos as one fixed sequence of IEEE double operations (no FMA, no table, no
// run-time CPU choice), so every machine and every build computes the same bits.
// Why not libm: glibc picks an FMA or a non-FMA variant of exp, log, sin and cos at run time by CPU
// (ifunc); the variants differ in the last bit of some results (measured on 2·10^7 inputs with
// GLIBC_TUNABLES=glibc.cpu.hwcaps=-AVX2,-FMA), and the sampler's weights floor(exp(d)·2^64) and
// Gumbel draws see every bit. These are accurate to about one double ulp (tested against libm).
// Compiled with -ffp-contract=off like every kernel: the compiler fuses nothing.
#pragma once

#include <cmath>
#include <cstdint>

namespace tpserve {

double PortableExp(double x);  // e^x; +inf above ~709.78, 0 below ~-745.13, NaN for NaN
double PortableLog(double x);  // ln x; -inf at 0, NaN below 0 or for NaN, +inf at +inf
// sin and cos of x for |x| < 2^30 (RoPE angles: position × frequency); larger |x| lose accuracy.
void PortableSinCos(double x, double* sin_x, double* cos_x);

// e^x in float, within one float ulp (99.5 % of floats the nearest): x = k ln2 + r with k = round(x log2 e)
// and r by two fmas against ln2 split in two floats, e^r by its degree-7 Taylor polynomial in fmas
// (relative error < 6e-9 for |r| <= 0.35), times 2^k as two powers of two (2^(k >> 1), then the rest: both
// normal, so only the last product rounds, to a denormal, 0 or inf where the result is one). Inline and
// branch-free so that the kernels' element-wise loops (softmax, SiLU, attention) vectorise; every operation is
// an IEEE float operation or an fma, each rounded once, so a vectorised loop (kernels/cpu/simd/exp_lanes.h)
// gives the same bits. x >= 89 gives +inf, x <= -104 (and -inf) gives 0, NaN gives NaN. (Until stop 46 the
// reduction and polynomial ran in doubles, 8 lanes to a vector and 27 operations: the exp then cost attention
// and SiLU 2.5x the time; 99.95 % of floats were the nearest.)
// PortableExpF's constants, also read by its vector copy (kernels/cpu/simd/exp_lanes.h).
struct ExpFConstants {
  static constexpr float kMax = 89.0f, kMin = -104.0f;  // the clamps of x: +inf above, 0 below
  static constexpr float kLog2e = 0x1.715476p+0f;
  static constexpr float kShift = 0x1.8p23f;  // adding it rounds to an integer held in the low mantissa bits
  static constexpr float kLn2Hi = 0x1.62e430p-1f, kLn2Lo = -0x1.05c610p-29f;  // ln 2 = hi + lo
  static constexpr float kTaylor[8] = {1.0f / 5040.0f, 1.0f / 720.0f, 1.0f / 120.0f, 1.0f / 24.0f,
                                       1.0f / 6.0f,    0.5f,           1.0f,           1.0f};  // highest first
};

inline float PortableExpF(float x) {
  using C = ExpFConstants;
  x = x > C::kMax ? C::kMax : x;  // a NaN stays
  x = x < C::kMin ? C::kMin : x;
  const float shifted = std::fma(x, C::kLog2e, C::kShift);
  const float kf = shifted - C::kShift;  // k, exact
  float r = std::fma(kf, -C::kLn2Hi, x);
  r = std::fma(kf, -C::kLn2Lo, r);
  float p = C::kTaylor[0];
  for (int i = 1; i < 8; ++i) p = std::fma(p, r, C::kTaylor[i]);
  // k in [-150, 129] from the low mantissa of `shifted`; 2^(k >> 1) and 2^(k - (k >> 1)) are normal floats.
  const int32_t k = __builtin_bit_cast(int32_t, shifted) - __builtin_bit_cast(int32_t, C::kShift);
  const int32_t k1 = k >> 1, k2 = k - k1;
  const float s1 = __builtin_bit_cast(float, static_cast<uint32_t>(k1 + 127) << 23);
  const float s2 = __builtin_bit_cast(float, static_cast<uint32_t>(k2 + 127) << 23);
  return (p * s1) * s2;
}

}  // namespace tpserve
