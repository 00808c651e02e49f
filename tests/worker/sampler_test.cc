// The sampler at TP = 1 against the gathered reference, its distribution against the filtered
// softmax, its independence from the batch, and its errors. (Multi-rank: distributed_sampler_test.)
#include "worker/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>

#include "tests/testing/gathered_sampler.h"
#include "tests/testing/sampling_cases.h"
#include "worker/counter_rng.h"
#include "worker/sampling_weight.h"
#include "worker/sum_exp.h"

namespace tpserve {
namespace {

using testing::GatheredSample;
using testing::RandomSamplingCase;
using testing::SamplingCase;

// Samples one row on a single rank.
StatusOr<SequenceResult> SampleOne(const std::vector<float>& logits, const SequencePlan& plan) {
  auto comm = MakeLocalCommunicator();
  const int64_t vocab = static_cast<int64_t>(logits.size());
  ASSIGN_OR_RETURN(std::vector<SequenceResult> results, SampleTokens(logits.data(), 1, 0, vocab, vocab, {&plan}, *comm));
  return results.at(0);
}

void ExpectSameResult(const SequenceResult& got, const SequenceResult& want, const std::string& where) {
  EXPECT_EQ(got.seq_id, want.seq_id) << where;
  EXPECT_EQ(got.token_id, want.token_id) << where;
  EXPECT_NEAR(got.logprob, want.logprob, 1e-5 + 1e-6 * std::fabs(want.logprob)) << where;
  ASSERT_EQ(got.top_logprobs.size(), want.top_logprobs.size()) << where;
  for (size_t i = 0; i < got.top_logprobs.size(); ++i) {
    EXPECT_EQ(got.top_logprobs[i].token_id, want.top_logprobs[i].token_id) << where << " top " << i;
    EXPECT_NEAR(got.top_logprobs[i].logprob, want.top_logprobs[i].logprob,
                1e-5 + 1e-6 * std::fabs(want.top_logprobs[i].logprob))
        << where << " top " << i;
  }
}

TEST(CounterRngTest, PhiloxMatchesPublishedKnownAnswers) {
  // Random123 kat_vectors for philox4x32-10: counter, key -> output.
  EXPECT_EQ(Philox4x32({0, 0, 0, 0}, {0, 0}), (PhiloxCounter{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}));
  EXPECT_EQ(Philox4x32({0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff}),
            (PhiloxCounter{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}));
  EXPECT_EQ(Philox4x32({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0}),
            (PhiloxCounter{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}));
}

TEST(CounterRngTest, UniformIsOpenIntervalAndPure) {
  double sum = 0;
  const int n = 100000;
  for (int i = 0; i < n; ++i) {
    const double u = CounterUniform(42, 7, i);
    ASSERT_GT(u, 0.0);
    ASSERT_LT(u, 1.0);
    ASSERT_EQ(u, CounterUniform(42, 7, i));
    ASSERT_LT(CounterGumbel(42, 7, i), kMaxGumbel);
    sum += u;
  }
  EXPECT_NEAR(sum / n, 0.5, 0.005);
  EXPECT_NE(CounterUniform(42, 7, 0), CounterUniform(43, 7, 0));
  EXPECT_NE(CounterUniform(42, 7, 0), CounterUniform(42, 8, 0));
  EXPECT_NE(CounterUniform(42, 7, 0), CounterUniform(42 + (uint64_t{1} << 32), 7, 0));  // high seed bits count
  // The extreme uniforms keep the Gumbel finite and below its bound.
  EXPECT_LT(-std::log(-std::log(1.0 - 0x1p-53)), kMaxGumbel);
  EXPECT_TRUE(std::isfinite(-std::log(-std::log(0x1p-53))));
}

TEST(CounterRngTest, GumbelUpperBoundHolds) {
  std::mt19937_64 rng(17);
  std::vector<uint64_t> bits = {0, 1, 2, (uint64_t{1} << 52) - 1, (uint64_t{1} << 52) - 2, (uint64_t{1} << 51),
                                (uint64_t{1} << 51) - 1, (uint64_t{1} << 51) + 1};
  for (int shift = 0; shift < 52; ++shift) {  // every leading-zero count, at both ends of its range
    const uint64_t c = uint64_t{1} << shift;
    bits.push_back((uint64_t{1} << 52) - 1 - c);
    bits.push_back((uint64_t{1} << 52) - 1 - (2 * c - 1));
  }
  for (int i = 0; i < 200000; ++i) bits.push_back(rng() >> 12);
  for (uint64_t b : bits) {
    const double g = GumbelFromBits(b);
    const double bound = GumbelUpperBound(b);
    ASSERT_LE(g, bound) << b;
    ASSERT_LT(bound, std::max(g, 0.0) + 2.0) << b;  // tight enough to prune where it matters (large g)
  }
  EXPECT_EQ(CounterGumbel(1, 2, 3), GumbelFromBits(CounterBits(1, 2, 3)));
}

TEST(SumExpTest, MatchesDoubleExp) {
  std::mt19937_64 rng(8);
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<float> x(1 + rng() % 3000);
    const float spread = trial % 2 ? 100.0f : 5.0f;
    for (float& v : x) v = std::uniform_real_distribution<float>(-spread, spread)(rng);
    if (trial % 3 == 0) x[rng() % x.size()] = -INFINITY;
    const float m = *std::max_element(x.begin(), x.end());
    double want = 0;
    for (float v : x) want += std::exp(static_cast<double>(v) - static_cast<double>(m));
    ASSERT_NEAR(SumExp(x.data(), static_cast<int64_t>(x.size()), m), want, 3e-7 * want) << trial;
  }
  const std::vector<float> edge = {0.0f, -86.0f, -88.0f, -1000.0f, -INFINITY, -0.3465f, 0.3465f - 0.6931f};
  double want = 0;
  for (float v : edge) want += v > -87.0f ? std::exp(static_cast<double>(v)) : 0.0;
  EXPECT_NEAR(SumExp(edge.data(), static_cast<int64_t>(edge.size()), 0.0f), want, 3e-7 * want);
}

TEST(SamplingWeightTest, NucleusCutoffIsExact) {
  std::mt19937_64 rng(5);
  for (int trial = 0; trial < 200000; ++trial) {
    // total < 2^40 and a 24-bit top_p: their product is exact in long double's 64-bit mantissa.
    const uint128 total = 1 + rng() % (uint64_t{1} << 40);
    float top_p = std::uniform_real_distribution<float>(0.0f, 1.0f)(rng);
    if (trial % 4 == 0) top_p = static_cast<float>(1 + rng() % 15) / 16.0f;  // exactly representable shares
    if (!(top_p > 0.0f && top_p < 1.0f)) continue;
    const long double share = static_cast<long double>(top_p) * static_cast<long double>(total);
    const uint128 cutoff = NucleusCutoff(top_p, total);
    ASSERT_LT(static_cast<long double>(cutoff), share) << top_p << " " << static_cast<uint64_t>(total);
    ASSERT_GE(static_cast<long double>(cutoff + 1), share) << top_p << " " << static_cast<uint64_t>(total);
  }
  EXPECT_EQ(NucleusCutoff(0.5f, 4), 1u);  // before 0, 1 < 2 kept; before 2 not
  EXPECT_EQ(SamplingWeight(3.0f, 3.0f), static_cast<uint128>(1) << 64);
  EXPECT_EQ(SamplingWeight(-INFINITY, 3.0f), 0u);
}

TEST(SamplerTest, MatchesGatheredReferenceOnRandomCases) {
  std::mt19937_64 rng(1234);
  int num_sampled = 0;
  for (int trial = 0; trial < 4000; ++trial) {
    const int64_t vocab = trial % 10 == 0 ? 1001 : 2 + static_cast<int64_t>(rng() % 300);
    const SamplingCase c = RandomSamplingCase(rng, vocab);
    const StatusOr<SequenceResult> got = SampleOne(c.logits, c.plan);
    ASSERT_TRUE(got.ok()) << "trial " << trial << ": " << got.status().ToString();
    ExpectSameResult(*got, GatheredSample(c.logits, c.plan), "trial " + std::to_string(trial));
    num_sampled += c.plan.sampling.is_greedy() ? 0 : 1;
    if (::testing::Test::HasFailure()) return;
  }
  EXPECT_GT(num_sampled, 2500);
}

TEST(SamplerTest, GreedyIsArgmaxWithTiesToLowestId) {
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 500; ++trial) {
    std::vector<float> logits(1 + rng() % 500);
    for (float& v : logits) v = static_cast<float>(rng() % 20);  // many ties
    SequencePlan plan;  // temperature 0
    plan.sampling.seed = rng();
    int32_t want = 0;
    for (int32_t i = 1; i < static_cast<int32_t>(logits.size()); ++i) {
      if (logits[i] > logits[want]) want = i;
    }
    const StatusOr<SequenceResult> got = SampleOne(logits, plan);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    ASSERT_EQ(got->token_id, want) << "trial " << trial;
  }
}

// Pearson's chi-square of observed counts against expected probabilities (zero ones must get none).
double ChiSquare(const std::map<int32_t, int>& counts, const std::vector<double>& probs, int n) {
  double chi2 = 0;
  for (size_t i = 0; i < probs.size(); ++i) {
    const auto it = counts.find(static_cast<int32_t>(i));
    const int observed = it == counts.end() ? 0 : it->second;
    if (probs[i] == 0) {
      EXPECT_EQ(observed, 0) << "token " << i << " is filtered out but was drawn";
      continue;
    }
    const double expected = probs[i] * n;
    chi2 += (observed - expected) * (observed - expected) / expected;
  }
  return chi2;
}

TEST(SamplerTest, FrequenciesFollowTheFilteredSoftmax) {
  // Ten logits; softmax(x / T) in double, then top-k 6 and top-p 0.9 by hand.
  const std::vector<float> logits = {1.0f, 2.5f, 0.3f, 2.4f, -1.0f, 1.7f, 0.9f, 2.0f, -3.0f, 1.2f};
  const float temperature = 0.8f;
  std::vector<double> p(logits.size());
  double z = 0;
  for (size_t i = 0; i < logits.size(); ++i) z += p[i] = std::exp(static_cast<double>(logits[i]) / temperature);
  // Descending: 1 (2.5), 3 (2.4), 7 (2.0), 5 (1.7), 9 (1.2), 0 (1.0) | 6, 2, 4, 8 cut by top-k 6.
  const std::vector<int> top6 = {1, 3, 7, 5, 9, 0};
  double mass6 = 0;
  for (int i : top6) mass6 += p[i];
  std::vector<double> want(logits.size(), 0.0);
  double cumulative = 0;
  for (int i : top6) {  // top-p 0.9 of the renormalised top-6
    if (cumulative >= 0.9 * mass6) break;
    want[i] = p[i];
    cumulative += p[i];
  }
  double kept = 0;
  for (double w : want) kept += w;
  for (double& w : want) w /= kept;
  ASSERT_EQ(want[0], 0.0);  // the example does cut something by top-p
  ASSERT_GT(want[9], 0.0);

  SequencePlan plan;
  plan.sampling.temperature = temperature;
  plan.sampling.top_k = 6;
  plan.sampling.top_p = 0.9f;
  plan.sampling.seed = 2024;
  const int n = 20000;
  std::map<int32_t, int> by_index, by_seed;
  for (int i = 0; i < n; ++i) {
    plan.sample_index = static_cast<uint32_t>(i);
    plan.sampling.seed = 2024;
    ++by_index[SampleOne(logits, plan)->token_id];
    plan.sample_index = 3;
    plan.sampling.seed = 1000 + static_cast<uint64_t>(i);
    ++by_seed[SampleOne(logits, plan)->token_id];
  }
  // 5 kept tokens: 4 degrees of freedom; P(chi2 > 30) ~ 5e-6. The draws are seeded: deterministic.
  EXPECT_LT(ChiSquare(by_index, want, n), 30.0);
  EXPECT_LT(ChiSquare(by_seed, want, n), 30.0);
}

TEST(SamplerTest, MinPFrequenciesFollowTheFilteredSoftmax) {
  std::vector<float> logits = {0.0f, -0.5f, -1.0f, -2.0f, -2.5f, 0.2f};  // T = 1
  std::vector<double> want(logits.size(), 0.0);
  double kept = 0;
  for (size_t i = 0; i < logits.size(); ++i) {  // min_p 0.2: p_i >= 0.2 p_max <=> x_i >= 0.2 + log 0.2 = -1.41
    if (logits[i] >= 0.2 + std::log(0.2)) kept += want[i] = std::exp(static_cast<double>(logits[i]));
  }
  for (double& w : want) w /= kept;
  SequencePlan plan;
  plan.sampling.temperature = 1.0f;
  plan.sampling.min_p = 0.2f;
  plan.sampling.seed = 99;
  const int n = 20000;
  std::map<int32_t, int> counts;
  for (int i = 0; i < n; ++i) {
    plan.sample_index = static_cast<uint32_t>(i);
    ++counts[SampleOne(logits, plan)->token_id];
  }
  EXPECT_LT(ChiSquare(counts, want, n), 30.0);  // 4 kept: 3 degrees of freedom
}

TEST(SamplerTest, RowResultDoesNotDependOnTheBatch) {
  std::mt19937_64 rng(99);
  const int64_t vocab = 777;
  std::vector<SamplingCase> cases;
  for (int i = 0; i < 40; ++i) cases.push_back(RandomSamplingCase(rng, vocab));
  std::vector<SequenceResult> alone;
  for (const SamplingCase& c : cases) alone.push_back(*SampleOne(c.logits, c.plan));
  auto comm = MakeLocalCommunicator();
  for (int trial = 0; trial < 20; ++trial) {
    // A random batch of the cases, in a random order, some twice.
    std::vector<int> pick;
    for (int i = 0; i < 1 + static_cast<int>(rng() % 30); ++i) pick.push_back(static_cast<int>(rng() % cases.size()));
    std::vector<float> logits;
    std::vector<const SequencePlan*> plans;
    for (int i : pick) {
      logits.insert(logits.end(), cases[i].logits.begin(), cases[i].logits.end());
      plans.push_back(&cases[i].plan);
    }
    const auto got = SampleTokens(logits.data(), static_cast<int64_t>(pick.size()), 0, vocab, vocab, plans, *comm);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    for (size_t r = 0; r < pick.size(); ++r) {
      const SequenceResult& want = alone[pick[r]];
      EXPECT_EQ((*got)[r].token_id, want.token_id);
      EXPECT_EQ((*got)[r].logprob, want.logprob);  // bitwise
      EXPECT_EQ((*got)[r].top_logprobs.size(), want.top_logprobs.size());
    }
  }
}

TEST(SamplerTest, SeedAndSampleIndexChangeTheDraw) {
  const std::vector<float> logits(64, 0.0f);  // uniform: every draw decides
  SequencePlan plan;
  plan.sampling.temperature = 1.0f;
  std::map<int32_t, int> tokens;
  for (uint32_t index = 0; index < 64; ++index) {
    plan.sample_index = index;
    ++tokens[SampleOne(logits, plan)->token_id];
  }
  EXPECT_GT(tokens.size(), 30u);  // 64 draws of 64 tokens: ~40 distinct expected
}

TEST(SamplerTest, RejectsBadParametersAndLogits) {
  const std::vector<float> logits = {0.0f, 1.0f, 2.0f};
  const auto code_of = [&](auto mutate, std::vector<float> values) {
    SequencePlan plan;
    plan.sampling.temperature = 1.0f;
    mutate(plan);
    return SampleOne(values, plan).status().code();
  };
  const auto bad = StatusCode::kInvalidArgument;
  EXPECT_EQ(code_of([](SequencePlan& p) { p.sampling.top_k = -1; }, logits), bad);
  EXPECT_EQ(code_of([](SequencePlan& p) { p.sampling.top_p = 0.0f; }, logits), bad);
  EXPECT_EQ(code_of([](SequencePlan& p) { p.sampling.top_p = 1.5f; }, logits), bad);
  EXPECT_EQ(code_of([](SequencePlan& p) { p.sampling.min_p = -0.1f; }, logits), bad);
  EXPECT_EQ(code_of([](SequencePlan& p) { p.sampling.repetition_penalty = 0.0f; }, logits), bad);
  EXPECT_EQ(code_of([](SequencePlan& p) { p.sampling.temperature = NAN; }, logits), bad);
  EXPECT_EQ(code_of([](SequencePlan& p) { p.sampling.presence_penalty = INFINITY; }, logits), bad);
  EXPECT_EQ(code_of([](SequencePlan& p) { p.sampling.num_logprobs = -2; }, logits), bad);
  EXPECT_EQ(code_of([](SequencePlan& p) { p.sampling.logit_bias = {{3, 1.0f}}; }, logits), bad);
  EXPECT_EQ(code_of([](SequencePlan& p) { p.sampling.logit_bias = {{1, INFINITY}}; }, logits), bad);
  EXPECT_EQ(code_of(
                [](SequencePlan& p) {
                  p.sampling.frequency_penalty = 0.5f;
                  p.penalty_tokens = {0, -1};
                },
                logits),
            bad);
  // Every token banned.
  EXPECT_EQ(code_of([](SequencePlan& p) { p.sampling.logit_bias = {{0, -INFINITY}, {1, -INFINITY}, {2, -INFINITY}}; },
                    logits),
            bad);
  EXPECT_EQ(code_of([](SequencePlan&) {}, {0.0f, NAN, 1.0f}), StatusCode::kInternal);
  EXPECT_EQ(code_of([](SequencePlan&) {}, {0.0f, INFINITY, 1.0f}), StatusCode::kInternal);
  // The same in the scan's 16-lane chunks, not only its tail.
  for (int at : {0, 17, 31}) {
    for (float v : {NAN, INFINITY}) {
      std::vector<float> wide(40, 0.5f);
      wide[at] = v;
      EXPECT_EQ(code_of([](SequencePlan&) {}, wide), StatusCode::kInternal) << "at " << at << " " << v;
    }
  }
  // -inf logits are fine: masked tokens.
  EXPECT_EQ(code_of([](SequencePlan&) {}, {-INFINITY, 0.0f, -INFINITY}), StatusCode::kOk);
}

TEST(SamplerTest, BiasAndPenaltiesSteerGreedy) {
  const std::vector<float> logits = {1.0f, 3.0f, 2.0f, -1.0f};
  SequencePlan plan, plain;
  plan.sampling.logit_bias = {{1, -INFINITY}};
  EXPECT_EQ(SampleOne(logits, plan)->token_id, 2);
  EXPECT_EQ(SampleOne(logits, plan)->logprob, 0.0f);  // not asked for: no log-sum-exp
  plan.sampling.num_logprobs = plain.sampling.num_logprobs = 1;
  EXPECT_FLOAT_EQ(SampleOne(logits, plan)->logprob, SampleOne(logits, plain)->logprob - 1.0f);
  plan.sampling.logit_bias = {{3, 4.5f}};
  EXPECT_EQ(SampleOne(logits, plan)->token_id, 3);
  plan.sampling.logit_bias.clear();
  plan.sampling.repetition_penalty = 2.0f;  // 3 / 2 = 1.5 < 2
  plan.penalty_tokens = {1};
  EXPECT_EQ(SampleOne(logits, plan)->token_id, 2);
  plan.sampling.repetition_penalty = 1.0f;
  plan.sampling.frequency_penalty = 0.4f;  // 3 - 3 * 0.4 = 1.8 < 2
  plan.penalty_tokens = {1, 1, 1};
  EXPECT_EQ(SampleOne(logits, plan)->token_id, 2);
  plan.penalty_tokens = {1, 1};  // 3 - 0.8 = 2.2 > 2
  EXPECT_EQ(SampleOne(logits, plan)->token_id, 1);
}

TEST(SamplerTest, EmptyBatch) {
  auto comm = MakeLocalCommunicator();
  const auto got = SampleTokens(nullptr, 0, 0, 10, 10, {}, *comm);
  ASSERT_TRUE(got.ok());
  EXPECT_TRUE(got->empty());
}

}  // namespace
}  // namespace tpserve
