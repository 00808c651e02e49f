// exp, log, sin and cos as one fixed sequence of IEEE double operations (no FMA, no table, no
// run-time CPU choice), so every machine and every build computes the same bits.
// Why not libm: glibc picks an FMA or a non-FMA variant of exp, log, sin and cos at run time by CPU
// (ifunc); the variants differ in the last bit of some results (measured on 2·10^7 inputs with
// GLIBC_TUNABLES=glibc.cpu.hwcaps=-AVX2,-FMA), and the sampler's weights floor(exp(d)·2^64) and
// Gumbel draws see every bit. These are accurate to about one double ulp (tested against libm).
// Compiled with -ffp-contract=off like every kernel: the compiler fuses nothing.
#pragma once

namespace tpserve {

double PortableExp(double x);  // e^x; +inf above ~709.78, 0 below ~-745.13, NaN for NaN
double PortableLog(double x);  // ln x; -inf at 0, NaN below 0 or for NaN, +inf at +inf
// sin and cos of x for |x| < 2^30 (RoPE angles: position × frequency); larger |x| lose accuracy.
void PortableSinCos(double x, double* sin_x, double* cos_x);

// e^x in float: the double result rounded once (within one float ulp, nearly always the nearest).
inline float PortableExpF(float x) { return static_cast<float>(PortableExp(static_cast<double>(x))); }

}  // namespace tpserve
