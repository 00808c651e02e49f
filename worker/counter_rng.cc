#include "worker/counter_rng.h"

#include <cmath>

#include "kernels/cpu/portable_math.h"

namespace tpserve {
namespace {

constexpr uint32_t kPhiloxM0 = 0xD2511F53u;
constexpr uint32_t kPhiloxM1 = 0xCD9E8D57u;
constexpr uint32_t kPhiloxW0 = 0x9E3779B9u;  // golden ratio
constexpr uint32_t kPhiloxW1 = 0xBB67AE85u;  // sqrt(3) - 1
constexpr int kPhiloxRounds = 10;

inline PhiloxCounter PhiloxRound(const PhiloxCounter& c, const PhiloxKey& k) {
  const uint64_t p0 = uint64_t{kPhiloxM0} * c[0];
  const uint64_t p1 = uint64_t{kPhiloxM1} * c[2];
  const auto hi = [](uint64_t p) { return static_cast<uint32_t>(p >> 32); };
  const auto lo = [](uint64_t p) { return static_cast<uint32_t>(p); };
  return {hi(p1) ^ c[1] ^ k[0], lo(p1), hi(p0) ^ c[3] ^ k[1], lo(p0)};
}

}  // namespace

inline PhiloxCounter Philox4x32Inline(PhiloxCounter counter, PhiloxKey key) {
  for (int round = 0; round < kPhiloxRounds; ++round) {
    if (round > 0) {
      key[0] += kPhiloxW0;
      key[1] += kPhiloxW1;
    }
    counter = PhiloxRound(counter, key);
  }
  return counter;
}

PhiloxCounter Philox4x32(PhiloxCounter counter, PhiloxKey key) { return Philox4x32Inline(counter, key); }

static inline uint64_t CounterBitsInline(uint64_t seed, uint32_t sample_index, int32_t token_id) {
  const PhiloxKey key = {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)};
  const PhiloxCounter out = Philox4x32Inline({static_cast<uint32_t>(token_id), sample_index, 0u, 0u}, key);
  return ((uint64_t{out[1]} << 32) | out[0]) >> 12;
}

uint64_t CounterBits(uint64_t seed, uint32_t sample_index, int32_t token_id) {
  return CounterBitsInline(seed, sample_index, token_id);
}

void CounterBitsForRange(uint64_t seed, uint32_t sample_index, int32_t first_token, int n, uint64_t* out) {
  for (int i = 0; i < n; ++i) out[i] = CounterBitsInline(seed, sample_index, first_token + i);
}

double UniformFromBits(uint64_t bits) { return (static_cast<double>(bits) + 0.5) * 0x1p-52; }

double GumbelFromBits(uint64_t bits) { return -PortableLog(-PortableLog(UniformFromBits(bits))); }

}  // namespace tpserve
