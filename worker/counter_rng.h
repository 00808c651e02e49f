// CounterRng: the counter-based random numbers of seeded sampling. Every draw is a pure function of
// (seed, sample_index, token id) -- no state, no stream position -- so a sequence's tokens never
// depend on which other sequences share its batch, on the TP degree, or on how the vocabulary is
// split across ranks: any rank can compute the draw of any token on its own.
//
// The generator is Philox-4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3",
// SC'11): key = the 64-bit seed, counter = (token id, sample_index, 0, 0).
#pragma once

#include <array>
#include <cstdint>

namespace tpserve {

using PhiloxCounter = std::array<uint32_t, 4>;
using PhiloxKey = std::array<uint32_t, 2>;

// Philox-4x32 with 10 rounds: a bijection of the counter for each key.
PhiloxCounter Philox4x32(PhiloxCounter counter, PhiloxKey key);

// The 52 random bits of the draw of (seed, sample_index, token id): bits 0-51 of the first two
// Philox output words. The functions below turn them into numbers.
uint64_t CounterBits(uint64_t seed, uint32_t sample_index, int32_t token_id);
// CounterBits of the tokens first_token, first_token + 1, ..., first_token + n - 1 into out[n]:
// the same values, computed many at a time (the loop vectorises).
void CounterBitsForRange(uint64_t seed, uint32_t sample_index, int32_t first_token, int n, uint64_t* out);

// A uniform double in the open interval (0, 1): the 52 bits centred in their cell, so
// 2^-53 <= u <= 1 - 2^-53 and neither log(u) nor log(-log(u)) can overflow.
double UniformFromBits(uint64_t bits);
// A standard Gumbel draw -log(-log(u)) of that u. Argmax over i of (x_i + Gumbel_i) is
// distributed as softmax(x) (the Gumbel-max trick).
double GumbelFromBits(uint64_t bits);
// A cheap upper bound of GumbelFromBits(bits) (no logarithms: a leading-zero count), so that a
// token that cannot win is skipped without its two logarithms. Uses -log(u) >= 1 - u.
inline double GumbelUpperBound(uint64_t bits) {
  // 1 - u = (c + 0.5) * 2^-52 with c = 2^52 - 1 - bits, and c + 0.5 >= 2^floor_log2 (2^-1 for c = 0).
  // Gumbel = -log(-log u) <= -log(1 - u) <= (52 - floor_log2) * ln 2; the margin covers rounding.
  const uint64_t c = ((uint64_t{1} << 52) - 1) - bits;
  const int floor_log2 = c == 0 ? -1 : 63 - __builtin_clzll(c);
  return (52 - floor_log2) * 0.6931471805599453 + 1e-9;
}

inline double CounterUniform(uint64_t seed, uint32_t sample_index, int32_t token_id) {
  return UniformFromBits(CounterBits(seed, sample_index, token_id));
}
inline double CounterGumbel(uint64_t seed, uint32_t sample_index, int32_t token_id) {
  return GumbelFromBits(CounterBits(seed, sample_index, token_id));
}

// Every Gumbel value is below this (the largest is -log(-log(1 - 2^-53)) ~= 36.7): a token whose
// logit is more than kMaxGumbel below the best score so far cannot win and needs no draw at all.
inline constexpr double kMaxGumbel = 40.0;

}  // namespace tpserve
