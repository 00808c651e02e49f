#include "tests/testing/sampling_cases.h"

#include <algorithm>
#include <cmath>

#include "common/check.h"

namespace tpserve::testing {
namespace {

template <typename T>
T Pick(std::mt19937_64& rng, std::initializer_list<T> choices) {
  std::uniform_int_distribution<size_t> index(0, choices.size() - 1);
  return *(choices.begin() + index(rng));
}

bool Chance(std::mt19937_64& rng, double p) { return std::bernoulli_distribution(p)(rng); }

}  // namespace

SamplingCase RandomSamplingCase(std::mt19937_64& rng, int64_t vocab_size) {
  SamplingCase c;
  c.logits.resize(static_cast<size_t>(vocab_size));
  const double scale = Pick(rng, {0.01, 0.3, 1.0, 3.0, 10.0});
  const double offset = std::uniform_real_distribution<double>(-20.0, 20.0)(rng);
  const bool has_ties = Chance(rng, 0.25);  // logits on a coarse grid: many exact ties
  std::normal_distribution<double> normal(0.0, 1.0);
  for (float& v : c.logits) {
    double z = normal(rng) * scale;
    if (has_ties) z = std::round(z * 2.0) / 2.0;
    v = static_cast<float>(offset + z);
  }
  if (Chance(rng, 0.2)) {  // a peaked distribution: a few tokens far above the rest
    for (int i = 0; i < 3; ++i) c.logits[rng() % vocab_size] += static_cast<float>(scale * 8.0);
  }
  if (Chance(rng, 0.15)) {  // masked tokens, never all of them
    for (int i = 0; i < 5; ++i) c.logits[rng() % vocab_size] = -INFINITY;
    if (std::none_of(c.logits.begin(), c.logits.end(), [](float v) { return std::isfinite(v); })) c.logits[0] = 0.0f;
  }

  SamplingParams& p = c.plan.sampling;
  p.temperature = Chance(rng, 0.2) ? 0.0f : Pick(rng, {0.05f, 0.3f, 0.7f, 1.0f, 1.5f, 4.0f});
  p.top_k = Chance(rng, 0.5) ? 0 : Pick<int32_t>(rng, {1, 2, 5, 40, static_cast<int32_t>(vocab_size - 1),
                                                         static_cast<int32_t>(vocab_size + 7)});
  p.top_p = Chance(rng, 0.5) ? 1.0f : Pick(rng, {0.05f, 0.3f, 0.5f, 0.8f, 0.9f, 0.95f, 0.999f});
  p.min_p = Chance(rng, 0.6) ? 0.0f : Pick(rng, {0.001f, 0.05f, 0.2f, 0.5f, 1.0f});
  p.seed = rng();
  p.num_logprobs = Pick(rng, {0, 0, 1, 5, 20});
  if (Chance(rng, 0.4)) {
    p.repetition_penalty = Pick(rng, {1.0f, 0.8f, 1.3f, 2.0f});
    p.presence_penalty = Pick(rng, {0.0f, 0.5f, -0.5f, 1.5f});
    p.frequency_penalty = Pick(rng, {0.0f, 0.1f, 0.7f, -0.3f});
    const int num_tokens = static_cast<int>(rng() % 60);
    for (int i = 0; i < num_tokens; ++i) {
      // Repeats are likely: draw from a small pool plus the vocabulary at large.
      c.plan.penalty_tokens.push_back(static_cast<int32_t>(Chance(rng, 0.5) ? rng() % std::min<int64_t>(8, vocab_size) : rng() % vocab_size));
    }
  }
  if (Chance(rng, 0.3)) {
    const int num_bias = 1 + static_cast<int>(rng() % 6);
    for (int i = 0; i < num_bias; ++i) {
      const float bias = Chance(rng, 0.2) ? -INFINITY : static_cast<float>(normal(rng) * 5.0);
      p.logit_bias.emplace_back(static_cast<int32_t>(rng() % vocab_size), bias);
    }
  }
  // Keep one token allowed whatever the bans: the largest finite logit that no bias bans.
  bool any_allowed = false;
  for (int64_t i = 0; i < vocab_size && !any_allowed; ++i) {
    const bool banned = std::any_of(p.logit_bias.begin(), p.logit_bias.end(),
                                    [&](const auto& b) { return b.first == i && b.second == -INFINITY; });
    any_allowed = std::isfinite(c.logits[i]) && !banned;
  }
  if (!any_allowed) p.logit_bias.clear();
  c.plan.seq_id = rng();
  c.plan.sample_index = static_cast<uint32_t>(rng() % 1000);
  c.plan.needs_token = true;
  return c;
}

std::vector<int64_t> RandomVocabSplit(std::mt19937_64& rng, int64_t vocab_size, int num_ranks, bool allow_empty) {
  CHECK(allow_empty || vocab_size >= num_ranks) << vocab_size << " tokens cannot fill " << num_ranks << " slices";
  std::vector<int64_t> bounds = {0, vocab_size};
  while (static_cast<int>(bounds.size()) < num_ranks + 1) {
    const int64_t cut = allow_empty ? static_cast<int64_t>(rng() % (vocab_size + 1))
                                    : 1 + static_cast<int64_t>(rng() % (vocab_size - 1));
    if (!allow_empty && std::find(bounds.begin(), bounds.end(), cut) != bounds.end()) continue;
    bounds.push_back(cut);
  }
  std::sort(bounds.begin(), bounds.end());
  return bounds;
}

}  // namespace tpserve::testing
