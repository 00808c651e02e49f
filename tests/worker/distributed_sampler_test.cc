// The vocabulary-parallel sampler on 2, 3 and 4 in-process ranks (tests/testing/thread_communicator.h):
// each rank passes only its uneven slice, and every rank's result equals the gathered reference.
#include <gtest/gtest.h>

#include <atomic>
#include <random>

#include "tests/testing/gathered_sampler.h"
#include "tests/testing/sampling_cases.h"
#include "tests/testing/thread_communicator.h"
#include "worker/sampler.h"

namespace tpserve {
namespace {

using testing::GatheredSample;
using testing::RandomSamplingCase;
using testing::RandomVocabSplit;
using testing::SamplingCase;
using testing::ThreadGroup;

// Runs one batch on a group and checks every rank's results against the reference.
void CheckBatch(ThreadGroup& group, const std::vector<SamplingCase>& cases, const std::vector<int64_t>& bounds,
                int64_t vocab) {
  std::vector<const SequencePlan*> plans;
  std::vector<SequenceResult> want;
  for (const SamplingCase& c : cases) {
    plans.push_back(&c.plan);
    want.push_back(GatheredSample(c.logits, c.plan));
  }
  std::vector<StatusOr<std::vector<SequenceResult>>> got(group.size(), Status(StatusCode::kInternal, "not run"));
  group.Run([&](Communicator& comm) {
    const int64_t begin = bounds[comm.rank()];
    const int64_t shard = bounds[comm.rank() + 1] - begin;
    std::vector<float> slice;  // [S, V_shard]
    for (const SamplingCase& c : cases) slice.insert(slice.end(), c.logits.begin() + begin, c.logits.begin() + begin + shard);
    got[comm.rank()] = SampleTokens(slice.data(), static_cast<int64_t>(cases.size()), begin, shard, vocab, plans, comm);
  });
  for (int r = 0; r < group.size(); ++r) {
    ASSERT_TRUE(got[r].ok()) << "rank " << r << ": " << got[r].status().ToString();
    ASSERT_EQ(got[r]->size(), cases.size());
    for (size_t s = 0; s < cases.size(); ++s) {
      const SequenceResult& g = (*got[r])[s];
      const SequenceResult& w = want[s];
      ASSERT_EQ(g.token_id, w.token_id) << "rank " << r << " row " << s;
      ASSERT_NEAR(g.logprob, w.logprob, 1e-5 + 1e-6 * std::fabs(w.logprob)) << "rank " << r << " row " << s;
      ASSERT_EQ(g.top_logprobs.size(), w.top_logprobs.size());
      for (size_t i = 0; i < g.top_logprobs.size(); ++i) {
        ASSERT_EQ(g.top_logprobs[i].token_id, w.top_logprobs[i].token_id);
        ASSERT_NEAR(g.top_logprobs[i].logprob, w.top_logprobs[i].logprob, 1e-5 + 1e-6 * std::fabs(w.top_logprobs[i].logprob));
      }
      // Every rank returns the same bits.
      ASSERT_EQ(g.logprob, (*got[0])[s].logprob);
    }
  }
}

class DistributedSamplerTest : public ::testing::TestWithParam<int> {};

TEST_P(DistributedSamplerTest, MatchesGatheredReference) {
  const int tp = GetParam();
  ThreadGroup group(tp);
  std::mt19937_64 rng(1000 + tp);
  for (int batch = 0; batch < 120; ++batch) {
    const int64_t vocab = batch % 2 == 0 ? 1001 : 5 + static_cast<int64_t>(rng() % 200);
    const std::vector<int64_t> bounds = RandomVocabSplit(rng, vocab, tp, /*allow_empty=*/batch % 5 == 0);
    std::vector<SamplingCase> cases;
    for (int i = 0; i < 12; ++i) cases.push_back(RandomSamplingCase(rng, vocab));
    CheckBatch(group, cases, bounds, vocab);
    if (HasFatalFailure()) return;
  }
}

TEST_P(DistributedSamplerTest, ErrorsAreTheSameOnEveryRank) {
  const int tp = GetParam();
  ThreadGroup group(tp);
  const int64_t vocab = 101;
  std::vector<float> logits(vocab, 0.5f);
  logits[vocab - 1] = NAN;  // on the last rank only
  SequencePlan plan;
  std::atomic<int> num_internal{0};
  group.Run([&](Communicator& comm) {
    const int64_t begin = vocab * comm.rank() / tp;
    const int64_t end = vocab * (comm.rank() + 1) / tp;
    const auto got = SampleTokens(logits.data() + begin, 1, begin, end - begin, vocab, {&plan}, comm);
    if (got.status().code() == StatusCode::kInternal) ++num_internal;
  });
  EXPECT_EQ(num_internal.load(), tp);
}

// Forwards to a rank's communicator and counts its all-gathers (the sampler's rounds).
class GatherCounter : public Communicator {
 public:
  explicit GatherCounter(Communicator& inner) : inner_(inner) {}
  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  Status AllReduceSum(float* data, size_t count) override { return inner_.AllReduceSum(data, count); }
  Status AllReduceSum(int64_t* data, size_t count) override { return inner_.AllReduceSum(data, count); }
  Status AllGather(const float* in, size_t count, float* out) override {
    ++num_gathers;
    return inner_.AllGather(in, count, out);
  }
  Status Broadcast(void* data, size_t bytes, int root) override { return inner_.Broadcast(data, bytes, root); }
  Status Barrier() override { return inner_.Barrier(); }
  double collective_seconds() const override { return inner_.collective_seconds(); }
  int num_gathers = 0;

 private:
  Communicator& inner_;
};

// Greedy rows that ask for no logprobs need only round 1 (the argmax): no log-sum-exp, no second
// all-gather. One row asking for a logprob brings round 2 back for the whole batch, on every rank.
TEST_P(DistributedSamplerTest, GreedyRowsWithoutLogprobsGatherOnce) {
  const int tp = GetParam();
  ThreadGroup group(tp);
  const int64_t vocab = 103;
  std::vector<float> logits(2 * vocab);
  for (int64_t i = 0; i < 2 * vocab; ++i) logits[i] = static_cast<float>((i * 37) % 101) / 10.0f;
  for (const int32_t num_logprobs : {0, 1}) {
    SequencePlan greedy, second;
    second.sampling.num_logprobs = num_logprobs;
    std::vector<int> gathers(tp);
    std::vector<float> logprobs(tp);
    group.Run([&](Communicator& comm) {
      GatherCounter counter(comm);
      const int64_t begin = vocab * comm.rank() / tp, end = vocab * (comm.rank() + 1) / tp;
      std::vector<float> slice(logits.begin() + begin, logits.begin() + end);
      slice.insert(slice.end(), logits.begin() + vocab + begin, logits.begin() + vocab + end);
      const auto got = SampleTokens(slice.data(), 2, begin, end - begin, vocab, {&greedy, &second}, counter);
      gathers[comm.rank()] = got.ok() ? counter.num_gathers : -1;
      logprobs[comm.rank()] = got.ok() ? (*got)[1].logprob : NAN;
    });
    const SequenceResult want = testing::GatheredSample({logits.begin() + vocab, logits.end()}, second);
    for (int r = 0; r < tp; ++r) {
      EXPECT_EQ(gathers[r], num_logprobs > 0 ? 2 : 1) << "rank " << r << ", num_logprobs " << num_logprobs;
      EXPECT_NEAR(logprobs[r], want.logprob, 1e-5) << "rank " << r << ", num_logprobs " << num_logprobs;
    }
    EXPECT_EQ(want.logprob < 0.0f, num_logprobs > 0);  // a real logprob exactly when asked
  }
}

INSTANTIATE_TEST_SUITE_P(Tp, DistributedSamplerTest, ::testing::Values(2, 3, 4));

}  // namespace
}  // namespace tpserve
