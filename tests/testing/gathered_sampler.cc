#include "tests/testing/gathered_sampler.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <map>
#include <numeric>

#include "common/check.h"
#include "worker/counter_rng.h"

namespace tpserve::testing {
namespace {

using Weight = unsigned __int128;

Weight WeightOf(float x, float m) {
  const double w = std::ldexp(std::exp(static_cast<double>(x) - static_cast<double>(m)), 64);
  return w < 1.0 ? 0 : static_cast<Weight>(w);
}

// Exactly: before < top_p * total.
bool BelowShare(Weight before, float top_p, Weight total) {
  int exponent = 0;
  const double fraction = std::frexp(static_cast<double>(top_p), &exponent);
  const Weight mant = static_cast<Weight>(std::ldexp(fraction, 24));
  const int shift = 24 - exponent;  // top_p = mant / 2^shift
  if (before == 0) return true;
  if (shift >= 127 || before > (~Weight{0} >> shift)) return false;  // before * 2^shift is huge
  return (before << shift) < mant * total;
}

}  // namespace

SequenceResult GatheredSample(const std::vector<float>& logits, const SequencePlan& plan) {
  const SamplingParams& p = plan.sampling;
  const int vocab = static_cast<int>(logits.size());

  std::vector<float> x = logits;
  for (const auto& [id, bias] : p.logit_bias) x[id] += bias;
  if (p.has_penalties()) {
    std::map<int32_t, int> counts;
    for (int32_t id : plan.penalty_tokens) ++counts[id];
    for (const auto& [id, count] : counts) {
      float& v = x[id];
      if (v > 0) {
        v = v / p.repetition_penalty;
      } else {
        v = v * p.repetition_penalty;
      }
      v -= p.frequency_penalty * static_cast<float>(count);
      v -= p.presence_penalty;
    }
  }
  if (!p.is_greedy()) {
    for (float& v : x) v = v / p.temperature;
  }
  for (float& v : x) {
    if (v == INFINITY) v = FLT_MAX;
  }

  // Finite tokens, by processed logit descending, ties to the lower id.
  std::vector<int32_t> order;
  for (int32_t i = 0; i < vocab; ++i) {
    if (std::isfinite(x[i])) order.push_back(i);
  }
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return x[a] > x[b]; });
  CHECK(!order.empty()) << "every token banned";

  int32_t token = order[0];
  if (!p.is_greedy()) {
    std::vector<int32_t> allowed = order;
    if (p.top_k > 0 && static_cast<size_t>(p.top_k) < allowed.size()) allowed.resize(p.top_k);
    const float m = x[allowed[0]];
    if (p.min_p > 0) {
      const double log_min_p = std::log(static_cast<double>(p.min_p));
      std::erase_if(allowed, [&](int32_t i) { return static_cast<double>(x[i]) - static_cast<double>(m) < log_min_p; });
    }
    if (p.top_p < 1) {
      Weight total = 0;
      for (int32_t i : allowed) total += WeightOf(x[i], m);
      Weight before = 0;
      size_t keep = 0;
      while (keep < allowed.size() && BelowShare(before, p.top_p, total)) before += WeightOf(x[allowed[keep++]], m);
      allowed.resize(keep);
    }
    double best = -INFINITY;
    for (int32_t i : allowed) {  // ascending ids are not guaranteed: compare ids on ties
      const double score = static_cast<double>(x[i]) + CounterGumbel(p.seed, plan.sample_index, i);
      if (score > best || (score == best && i < token)) {
        best = score;
        token = i;
      }
    }
  }

  // Raw log-softmax with an explicit double sum.
  double raw_max = -INFINITY;
  for (float v : logits) raw_max = std::max(raw_max, static_cast<double>(v));
  double sum = 0;
  for (float v : logits) sum += std::exp(static_cast<double>(v) - raw_max);
  const double log_sum_exp = raw_max + std::log(sum);

  SequenceResult result;
  result.seq_id = plan.seq_id;
  result.token_id = token;
  if (p.num_logprobs > 0) result.logprob = static_cast<float>(static_cast<double>(logits[token]) - log_sum_exp);
  std::vector<int32_t> by_raw;
  for (int32_t i = 0; i < vocab; ++i) {
    if (std::isfinite(logits[i])) by_raw.push_back(i);
  }
  std::stable_sort(by_raw.begin(), by_raw.end(), [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
  for (int32_t n = 0; n < p.num_logprobs && n < static_cast<int32_t>(by_raw.size()); ++n) {
    const int32_t id = by_raw[n];
    result.top_logprobs.push_back({id, static_cast<float>(static_cast<double>(logits[id]) - log_sum_exp)});
  }
  return result;
}

}  // namespace tpserve::testing
