// The fixed-point probability weights of nucleus (top-p) sampling.
// A token's weight relative to the row maximum m is q = floor(exp(x - m) * 2^64), an integer, so a
// sum of weights is exact and the same in any order: the same whichever rank holds which token,
// which is what makes the distributed nucleus equal the gathered one bit for bit.
// The rounding (at most 2^-64 of the largest token's weight per token) is far below float precision.
#pragma once

#include <cmath>
#include <cstdint>

#include "common/check.h"
#include "kernels/cpu/portable_math.h"
#include "worker/float_packing.h"

namespace tpserve {

// q = floor(exp(x - m) * 2^64); 0 for x = -inf. REQUIRES: x <= m, m finite.
inline uint128 SamplingWeight(float x, float m) {
  const double d = static_cast<double>(x) - static_cast<double>(m);
  if (!(d > -46.0)) return 0;  // exp(-46) * 2^64 < 0.2 floors to 0; also catches x = -inf
  const double scaled = PortableExp(d) * 0x1p64;  // exact: a power-of-two scaling of a normal number
  if (scaled >= 0x1p64) return static_cast<uint128>(1) << 64;  // exp(0) = 1 (x = m)
  return static_cast<uint64_t>(scaled);  // floor; a 64-bit conversion is far cheaper than a 128-bit one
}

// The nucleus keeps a token (in descending order) iff the weights before it sum to less than
// top_p * total, i.e. iff that sum <= NucleusCutoff(top_p, total). Exact integer arithmetic:
// top_p = mant * 2^-s with a 24-bit integer mant, so the test is sum * 2^s < mant * total.
// REQUIRES: 0 < top_p < 1, total < 2^100.
inline uint128 NucleusCutoff(float top_p, uint128 total) {
  CHECK(top_p > 0.0f && top_p < 1.0f) << top_p;
  CHECK(total < (static_cast<uint128>(1) << 100));
  int exponent = 0;
  const double fraction = std::frexp(static_cast<double>(top_p), &exponent);  // top_p = f * 2^e
  const uint128 mant = static_cast<uint64_t>(std::ldexp(fraction, 24));         // exact: 24 bits
  const int shift = 24 - exponent;                                               // >= 24
  const uint128 product = mant * total;
  if (product == 0) return 0;
  if (shift >= 128) return 0;
  return (product - 1) >> shift;
}

}  // namespace tpserve
