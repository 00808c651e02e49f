#include "kernels/cpu/portable_math.h"

#include <cmath>
#include <cstdint>
#include <cstring>

namespace tpserve {
namespace {

// ln 2 in two parts (fdlibm): kLn2Hi has 32 significant bits, so k · kLn2Hi is exact for |k| < 2^21.
constexpr double kLn2Hi = 6.93147180369123816490e-01;
constexpr double kLn2Lo = 1.90821492927058770002e-10;
constexpr double kInvLn2 = 1.44269504088896338700e+00;
constexpr double kRoundShift = 0x1.8p52;  // x + shift - shift rounds x to an integer (|x| < 2^51)

double FromBits(uint64_t bits) {
  double d;
  std::memcpy(&d, &bits, sizeof(d));
  return d;
}
uint64_t ToBits(double d) {
  uint64_t bits;
  std::memcpy(&bits, &d, sizeof(bits));
  return bits;
}
double Pow2(int k) { return FromBits(static_cast<uint64_t>(k + 1023) << 52); }  // REQUIRES: -1022 <= k <= 1023

}  // namespace

double PortableExp(double x) {
  if (std::isnan(x)) return x;
  if (x > 709.782712893383973096) return INFINITY;
  if (x < -745.133219101941108420) return 0.0;
  // x = k ln2 + r, |r| <= ln2 / 2 (plus the rounding of k).
  const double kd = (x * kInvLn2 + kRoundShift) - kRoundShift;
  const int k = static_cast<int>(kd);
  const double r = (x - kd * kLn2Hi) - kd * kLn2Lo;
  // e^r - 1 - r = r^2 (1/2! + r/3! + ... + r^11/13!) by Horner: the last term is below 2^-60 of the sum.
  double p = 1.0 / 6227020800.0;  // 1/13!
  const double kInvFact[] = {1.0 / 479001600.0, 1.0 / 39916800.0, 1.0 / 3628800.0, 1.0 / 362880.0,
                             1.0 / 40320.0,     1.0 / 5040.0,     1.0 / 720.0,     1.0 / 120.0,
                             1.0 / 24.0,        1.0 / 6.0,        0.5};
  for (double c : kInvFact) p = p * r + c;
  const double y = 1.0 + (r + r * r * p);
  // y · 2^k in two exact power-of-two steps so that k = 1024 and subnormal results work.
  const int k1 = k / 2;
  return y * Pow2(k1) * Pow2(k - k1);
}

double PortableLog(double x) {
  if (std::isnan(x) || x < 0.0) return NAN;
  if (x == 0.0) return -INFINITY;
  if (std::isinf(x)) return x;
  int e = 0;
  if (x < 0x1p-1022) {  // subnormal: make it normal first
    x *= 0x1p54;
    e = -54;
  }
  // x = 2^e · m with m in [sqrt(1/2), sqrt(2)).
  uint64_t bits = ToBits(x);
  e += static_cast<int>(bits >> 52) - 1023;
  double m = FromBits((bits & 0x000fffffffffffffULL) | 0x3ff0000000000000ULL);  // [1, 2)
  if (m > 1.41421356237309504880) {
    m *= 0.5;
    e += 1;
  }
  // log(m) = log(1 + f) = 2 atanh(s), s = f / (2 + f), |s| < 0.1716; fdlibm's arrangement:
  // log(1+f) = f - (f²/2 - s (f²/2 + R)), R = Σ_{j>=1} 2 s^{2j} / (2j + 1).
  const double f = m - 1.0;
  const double s = f / (2.0 + f);
  const double z = s * s;
  double poly = 2.0 / 25.0;  // through s^24: the next term is below 2^-60 of the sum
  for (int j = 11; j >= 1; --j) poly = poly * z + 2.0 / (2 * j + 1);
  const double r = z * poly;
  const double hfsq = 0.5 * f * f;
  const double ed = static_cast<double>(e);
  return ed * kLn2Hi - ((hfsq - (s * (hfsq + r) + ed * kLn2Lo)) - f);
}

void PortableSinCos(double x, double* sin_x, double* cos_x) {
  // x = n π/2 + r, |r| <= π/4, with π/2 in three parts of 33 bits (fdlibm's pio2_1, pio2_2, pio2_3):
  // n · part is exact for |n| < 2^20, the rest is far below a double ulp of r.
  constexpr double kInvPio2 = 6.36619772367581382433e-01;
  constexpr double kPio2_1 = 1.57079632673412561417e+00;
  constexpr double kPio2_2 = 6.07710050630396597660e-11;
  constexpr double kPio2_3 = 2.02226624871116645580e-21;
  const double nd = (x * kInvPio2 + kRoundShift) - kRoundShift;
  const double r = ((x - nd * kPio2_1) - nd * kPio2_2) - nd * kPio2_3;
  const double z = r * r;
  // Taylor series through r^17 (sin) and r^16 (cos): the next terms are below 2^-58 on |r| <= pi/4.
  // sin r = r + r z P(z), P = -1/3! + z/5! - ... + z^7/17!;  cos r = 1 - z/2 + z^2 Q(z), Q = 1/4! - ... + z^6/16!.
  double ps = 1.0 / 355687428096000.0;  // 1/17!
  const double kSin[] = {-1.0 / 1307674368000.0, 1.0 / 6227020800.0, -1.0 / 39916800.0, 1.0 / 362880.0,
                         -1.0 / 5040.0,          1.0 / 120.0,        -1.0 / 6.0};
  for (double c : kSin) ps = ps * z + c;
  double pc = 1.0 / 20922789888000.0;  // 1/16!
  const double kCos[] = {-1.0 / 87178291200.0, 1.0 / 479001600.0, -1.0 / 3628800.0, 1.0 / 40320.0,
                         -1.0 / 720.0,         1.0 / 24.0};
  for (double c : kCos) pc = pc * z + c;
  const double s = r + r * z * ps;
  const double c = (1.0 - 0.5 * z) + z * z * pc;
  switch (static_cast<int64_t>(nd) & 3) {
    case 0: *sin_x = s; *cos_x = c; break;
    case 1: *sin_x = c; *cos_x = -s; break;
    case 2: *sin_x = -s; *cos_x = -c; break;
    default: *sin_x = -c; *cos_x = s; break;
  }
}

}  // namespace tpserve
