// Candidates of the distributed sampler (worker/sampler.h): a token on its way through the filters,
// the one order every rank sorts them in, their transport through the all-gathers, and the
// selection of a gathered union's best n. Internal to the sampler.
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

#include "worker/float_packing.h"

namespace tpserve::sampling {

inline constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// A token on its way through the filters.
struct Candidate {
  float value = kNegInf;  // processed logit (steps 1-4 of sampler.h)
  float raw = kNegInf;    // unmodified logit, for the logprob
  int32_t id = -1;        // -1: padding
};

// Descending value, ties to the lower id, padding last.
inline bool Before(const Candidate& a, const Candidate& b) {
  if (a.value != b.value) return a.value > b.value;
  return static_cast<uint32_t>(a.id) < static_cast<uint32_t>(b.id);
}

// Min-p keeps a token of processed logit x when x - m >= log(min_p), m the largest x (in double).
inline bool PassesMinP(float x, float m, double log_min_p) {
  return static_cast<double>(x) - static_cast<double>(m) >= log_min_p;
}

// A candidate's transport through the float all-gathers (inline: the rounds move thousands).
inline void PushCandidate(FloatPacker& packer, const Candidate& c) {
  packer.PushFloat(c.value);
  packer.PushFloat(c.raw);
  packer.PushU32(static_cast<uint32_t>(c.id + 1));
}
inline Candidate PopCandidate(FloatUnpacker& unpacker) {
  Candidate c;
  c.value = unpacker.PopFloat();
  c.raw = unpacker.PopFloat();
  c.id = static_cast<int32_t>(unpacker.PopU32()) - 1;
  return c;
}

// Keeps the best n of candidates (Before order), dropping padding.
std::vector<Candidate> BestOf(std::vector<Candidate> candidates, size_t n);

}  // namespace tpserve::sampling
