// exp, log, sin and cos as one fixed sequence of IEEE double operations (no FMA, no table, no
// run-time CPU choice), so every machine and every build computes the same bits.
// Why not libm: glibc picks an FMA or a non-FMA variant of exp, log, sin and cos at run time by CPU
// (ifunc); the variants differ in the last bit of some results (measured on 2·10^7 inputs with
// GLIBC_TUNABLES=glibc.cpu.hwcaps=-AVX2,-FMA), and the sampler's weights floor(exp(d)·2^64) and
// Gumbel draws see every bit. These are accurate to about one double ulp (tested against libm).
// Compiled with -ffp-contract=off like every kernel: the compiler fuses nothing.
#pragma once

#include <cstdint>

namespace tpserve {

double PortableExp(double x);  // e^x; +inf above ~709.78, 0 below ~-745.13, NaN for NaN
double PortableLog(double x);  // ln x; -inf at 0, NaN below 0 or for NaN, +inf at +inf
// sin and cos of x for |x| < 2^30 (RoPE angles: position × frequency); larger |x| lose accuracy.
void PortableSinCos(double x, double* sin_x, double* cos_x);

// e^x in float, within one float ulp (nearly always the nearest): x = k ln2 + r in double, e^r by
// its degree-7 Taylor polynomial (relative error < 6e-9), times 2^k, rounded to float once. Inline
// and branch-free so that the kernels' element-wise loops (softmax, SiLU, attention) vectorise;
// every operation is element-wise IEEE double, so a vectorised loop gives the same bits.
// x >= 89 gives +inf, x <= -104 (and -inf) gives 0, NaN gives NaN.
inline float PortableExpF(float x) {
  constexpr double kInvLn2 = 1.44269504088896338700e+00;
  constexpr double kLn2 = 6.93147180559945286227e-01;
  constexpr double kShift = 0x1.8p52;  // adding it rounds to an integer held in the low mantissa bits
  double xd = static_cast<double>(x);
  xd = xd > 89.0 ? 89.0 : xd;
  xd = xd < -104.0 ? -104.0 : xd;
  const double shifted = xd * kInvLn2 + kShift;
  const double kd = shifted - kShift;  // k = round(x / ln2), exact
  const double r = xd - kd * kLn2;     // |r| <= ~0.35; k·ln2's rounding is far below a float ulp
  double p = 1.0 / 5040.0;
  p = p * r + 1.0 / 720.0;
  p = p * r + 1.0 / 120.0;
  p = p * r + 1.0 / 24.0;
  p = p * r + 1.0 / 6.0;
  p = p * r + 0.5;
  p = p * r + 1.0;
  p = p * r + 1.0;
  // 2^k from k's bits in the low mantissa of `shifted` (k in [-150, 129]: a normal double).
  const int64_t k = __builtin_bit_cast(int64_t, shifted) - __builtin_bit_cast(int64_t, kShift);
  const double scale = __builtin_bit_cast(double, static_cast<uint64_t>(k + 1023) << 52);
  return static_cast<float>(p * scale);
}

}  // namespace tpserve
