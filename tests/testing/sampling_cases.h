// Seeded random sampling problems for the sampler tests: one row's full logits and its plan,
// drawn so that every branch of sampler.h is exercised (greedy, each filter alone and combined,
// penalties, bias including bans, ties, -inf logits, flat and peaked distributions).
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "comm/step_plan.h"

namespace tpserve::testing {

struct SamplingCase {
  std::vector<float> logits;  // [V]
  SequencePlan plan;
};

// A random case over a vocabulary of vocab_size (>= 2) tokens; at least one token is allowed.
SamplingCase RandomSamplingCase(std::mt19937_64& rng, int64_t vocab_size);

// Splits [0, vocab_size) into num_ranks contiguous slices of uneven sizes (some may be empty when
// allow_empty); returns the num_ranks + 1 boundaries. REQUIRES: allow_empty or vocab_size >= num_ranks.
std::vector<int64_t> RandomVocabSplit(std::mt19937_64& rng, int64_t vocab_size, int num_ranks, bool allow_empty);

}  // namespace tpserve::testing
