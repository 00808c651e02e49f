// GumbelDraw: the running Gumbel-max winner of one row of the distributed sampler (step 8 of
// worker/sampler.h): the allowed token maximising x_i + Gumbel(seed, sample_index, i), in double,
// ties to the lowest id. Offers may come in any order and from any rank's slice; merging the
// winners of several slices gives the winner of their union. Internal to the sampler.
#pragma once

#include <cstdint>
#include <limits>

#include "worker/counter_rng.h"
#include "worker/sampling_candidate.h"

namespace tpserve::sampling {

struct GumbelDraw {
  double score = -std::numeric_limits<double>::infinity();
  int32_t id = -1;
  float raw = kNegInf;

  // Offers token c with its Gumbel draw; ties go to the lower id. Most tokens of a large
  // vocabulary lose by a margin that the cheap bounds show without the draw's logarithms.
  void Offer(const Candidate& c, uint64_t seed, uint32_t sample_index) {
    if (Excludes(c.value)) return;
    OfferWithBits(c, CounterBits(seed, sample_index, c.id));
  }
  // The same, with c's CounterBits already drawn.
  void OfferWithBits(const Candidate& c, uint64_t bits) {
    const double x = static_cast<double>(c.value);
    if (x + GumbelUpperBound(bits) < score) return;
    const double score_c = x + GumbelFromBits(bits);
    if (score_c > score || (score_c == score && static_cast<uint32_t>(c.id) < static_cast<uint32_t>(id))) {
      score = score_c;
      id = c.id;
      raw = c.raw;
    }
  }
  // True when a token of processed logit x cannot beat the winner whatever its draw.
  bool Excludes(float x) const { return static_cast<double>(x) + kMaxGumbel < score; }
};

}  // namespace tpserve::sampling
