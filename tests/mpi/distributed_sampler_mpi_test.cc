// The vocabulary-parallel sampler over MPI at np 2, 3, 4: every rank builds the same seeded
// batches, passes only its uneven slice of the vocabulary (1001 tokens and random splits, empty
// slices included), and must return what the gathered reference returns on the full logits --
// the same token ids and top-logprob ids exactly, the same logprob bits on every rank.
#include <cmath>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "comm/mpi_communicator.h"
#include "tests/testing/gathered_sampler.h"
#include "tests/testing/sampling_cases.h"
#include "worker/sampler.h"

namespace tpserve {
namespace {

using testing::GatheredSample;
using testing::RandomSamplingCase;
using testing::RandomVocabSplit;
using testing::SamplingCase;

std::unique_ptr<MpiCommunicator> MakeComm() {
  auto comm = MpiCommunicator::Create(MPI_COMM_WORLD);
  CHECK(comm.ok()) << comm.status().ToString();
  return std::move(comm).value();
}

TEST(DistributedSamplerMpiTest, MatchesGatheredReference) {
  auto comm = MakeComm();
  std::mt19937_64 rng(4242 + comm->size());  // the same stream on every rank
  int num_cases = 0;
  for (int batch = 0; batch < 200; ++batch) {
    const int64_t vocab = batch % 4 == 3 ? 4 + static_cast<int64_t>(rng() % 100) : 1001;  // >= np tokens
    const std::vector<int64_t> bounds = RandomVocabSplit(rng, vocab, comm->size(), /*allow_empty=*/batch % 7 == 0);
    std::vector<SamplingCase> cases;
    for (int i = 0; i < 16; ++i) cases.push_back(RandomSamplingCase(rng, vocab));

    const int64_t begin = bounds[comm->rank()];
    const int64_t shard = bounds[comm->rank() + 1] - begin;
    std::vector<float> slice;  // [S, V_shard]
    std::vector<const SequencePlan*> plans;
    for (const SamplingCase& c : cases) {
      slice.insert(slice.end(), c.logits.begin() + begin, c.logits.begin() + begin + shard);
      plans.push_back(&c.plan);
    }
    const auto got = SampleTokens(slice.data(), static_cast<int64_t>(cases.size()), begin, shard, vocab, plans, *comm);
    ASSERT_TRUE(got.ok()) << "batch " << batch << ": " << got.status().ToString();

    std::vector<float> mine;  // [S, 2]: token id, logprob -- to compare bits across ranks
    for (size_t s = 0; s < cases.size(); ++s) {
      const SequenceResult& g = (*got)[s];
      const SequenceResult want = GatheredSample(cases[s].logits, cases[s].plan);
      ASSERT_EQ(g.token_id, want.token_id) << "batch " << batch << " row " << s;
      ASSERT_NEAR(g.logprob, want.logprob, 1e-5 + 1e-6 * std::fabs(want.logprob)) << "batch " << batch << " row " << s;
      ASSERT_EQ(g.top_logprobs.size(), want.top_logprobs.size());
      for (size_t i = 0; i < g.top_logprobs.size(); ++i) {
        ASSERT_EQ(g.top_logprobs[i].token_id, want.top_logprobs[i].token_id) << "batch " << batch << " row " << s;
      }
      mine.push_back(static_cast<float>(g.token_id));
      mine.push_back(g.logprob);
      ++num_cases;
    }
    std::vector<float> all(mine.size() * comm->size());
    ASSERT_TRUE(comm->AllGather(mine.data(), mine.size(), all.data()).ok());
    for (int r = 1; r < comm->size(); ++r) {
      for (size_t i = 0; i < mine.size(); ++i) ASSERT_EQ(all[r * mine.size() + i], all[i]) << "rank " << r;
    }
  }
  EXPECT_EQ(num_cases, 3200);
}

TEST(DistributedSamplerMpiTest, BadLogitsOnOneRankFailEveryRank) {
  auto comm = MakeComm();
  const int64_t vocab = 1001;
  std::vector<float> logits(vocab, 0.25f);
  logits[vocab - 1] = NAN;  // held by the last rank only
  SequencePlan plan;
  plan.sampling.temperature = 1.0f;
  const int64_t begin = vocab * comm->rank() / comm->size();
  const int64_t end = vocab * (comm->rank() + 1) / comm->size();
  const auto got = SampleTokens(logits.data() + begin, 1, begin, end - begin, vocab, {&plan}, *comm);
  EXPECT_EQ(got.status().code(), StatusCode::kInternal);
}

}  // namespace
}  // namespace tpserve
