// BeamSearch's rules on hand-made candidates (coordinator/beam_search.h); the engine-level test
// (beam_search_engine_test.cc) checks the whole search against a float64 reference.
#include "coordinator/beam_search.h"

#include <gtest/gtest.h>

#include <cmath>

namespace tpserve {
namespace {

constexpr int32_t kEos = 9;

struct TestBeam {
  std::vector<int32_t> ids;
  std::vector<float> logprobs;
  double cumulative = 0;
  std::vector<TokenLogprob> candidates;
};

std::vector<BeamSearch::Beam> View(const std::vector<TestBeam>& beams) {
  std::vector<BeamSearch::Beam> view;
  for (size_t i = 0; i < beams.size(); ++i) {
    view.push_back({static_cast<int32_t>(i), &beams[i].ids, &beams[i].logprobs, beams[i].cumulative,
                    &beams[i].candidates});
  }
  return view;
}

bool EndsAtEos(int32_t token) { return token == kEos; }

TEST(BeamSearchTest, AnEndingCandidateFinishesOnlyWithinTheFirstWidthRanks) {
  BeamSearch within({2, 1.0f, EarlyStopping::kHeuristic}, 10);
  std::vector<TestBeam> beams = {{{}, {}, 0, {{1, -0.1f}, {kEos, -0.2f}, {2, -0.3f}, {3, -0.4f}}}};
  auto next = within.Step(View(beams), EndsAtEos);
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(within.num_finished(), 1);
  ASSERT_EQ(next->size(), 2u);
  EXPECT_EQ((*next)[0].token_id, 1);
  EXPECT_EQ((*next)[1].token_id, 2);

  BeamSearch below({2, 1.0f, EarlyStopping::kHeuristic}, 10);
  beams[0].candidates = {{1, -0.1f}, {2, -0.2f}, {kEos, -0.3f}, {3, -0.4f}};
  next = below.Step(View(beams), EndsAtEos);
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(below.num_finished(), 0);  // rank 2 of width 2: ignored
  ASSERT_EQ(next->size(), 2u);
  EXPECT_EQ((*next)[1].token_id, 2);
}

TEST(BeamSearchTest, RanksAcrossBeamsByCumulativeLogprobTiesToTheLowerSlot) {
  BeamSearch search({2, 1.0f, EarlyStopping::kHeuristic}, 10);
  std::vector<TestBeam> beams = {
      {{5}, {-1.0f}, -1.0, {{1, -0.5f}, {2, -2.0f}, {3, -3.0f}, {4, -4.0f}}},
      {{6}, {-0.5f}, -0.5, {{1, -1.0f}, {2, -1.5f}, {3, -3.0f}, {4, -4.0f}}},
  };
  auto next = search.Step(View(beams), EndsAtEos);
  ASSERT_TRUE(next.ok());
  ASSERT_EQ(next->size(), 2u);
  // -1.5 on both beams (token 1): the lower slot first.
  EXPECT_EQ((*next)[0].parent, 0);
  EXPECT_EQ((*next)[0].token_id, 1);
  EXPECT_EQ((*next)[1].parent, 1);
  EXPECT_EQ((*next)[1].token_id, 1);
}

TEST(BeamSearchTest, EarlyStoppingRules) {
  // Two finished hypotheses at step 1 (scores -0.1, -0.2: two ending candidates, as two stop ids
  // would give); the best live beam then has -0.3 at length 1.
  auto run = [](EarlyStopping es, float penalty) {
    BeamSearch search({2, penalty, es}, 4);
    std::vector<TestBeam> beams = {{{}, {}, 0, {{kEos, -0.1f}, {kEos + 1, -0.2f}, {1, -0.3f}, {2, -0.4f}}}};
    auto next = search.Step(View(beams), [](int32_t t) { return t >= kEos; });
    EXPECT_TRUE(next.ok());
    return search.done();
  };
  EXPECT_TRUE(run(EarlyStopping::kWhenFull, 1.0f));
  EXPECT_TRUE(run(EarlyStopping::kHeuristic, 1.0f));  // -0.2 >= -0.3 / 1
  // never, penalty 1: the live beam could reach -0.3 / 4 = -0.075 > -0.2 at max_tokens: go on.
  EXPECT_FALSE(run(EarlyStopping::kNever, 1.0f));
  EXPECT_TRUE(run(EarlyStopping::kNever, 0.0f));  // without a penalty it can only fall
}

TEST(BeamSearchTest, MaxTokensFinishesTheLiveBeamsByLength) {
  BeamSearch search({2, 0.0f, EarlyStopping::kHeuristic}, 1);
  std::vector<TestBeam> beams = {{{}, {}, 0, {{1, -0.1f}, {2, -0.2f}, {3, -0.3f}, {4, -0.4f}}}};
  auto next = search.Step(View(beams), EndsAtEos);
  ASSERT_TRUE(next.ok());
  EXPECT_TRUE(next->empty());
  ASSERT_TRUE(search.done());
  const std::vector<BeamHypothesis> best = search.Best(2);
  ASSERT_EQ(best.size(), 2u);
  EXPECT_EQ(best[0].output_ids, std::vector<int32_t>{1});
  EXPECT_EQ(best[1].output_ids, std::vector<int32_t>{2});
  EXPECT_FALSE(best[0].ended);
  EXPECT_DOUBLE_EQ(best[1].score, static_cast<double>(-0.2f));
}

TEST(BeamSearchTest, LengthPenaltyDividesByTokensBeforeTheEnd) {
  BeamSearch search({1, 2.0f, EarlyStopping::kWhenFull}, 10);
  std::vector<TestBeam> beams = {{{4, 5}, {-1.0f, -1.0f}, -2.0, {{kEos, -1.0f}, {1, -2.0f}}}};
  auto next = search.Step(View(beams), EndsAtEos);
  ASSERT_TRUE(next.ok());
  ASSERT_TRUE(search.done());
  const std::vector<BeamHypothesis> best = search.Best(1);
  ASSERT_EQ(best.size(), 1u);
  EXPECT_TRUE(best[0].ended);
  EXPECT_DOUBLE_EQ(best[0].score, -3.0 / 4.0);  // 2 tokens before EOS, squared
}

TEST(BeamSearchTest, RejectsBadConfigAndCandidates) {
  EXPECT_FALSE(ValidateBeamConfig({kMaxBeamWidth + 1, 1.0f, EarlyStopping::kHeuristic}).ok());
  EXPECT_FALSE(ValidateBeamConfig({2, NAN, EarlyStopping::kHeuristic}).ok());
  EXPECT_TRUE(ValidateBeamConfig({2, -1.0f, EarlyStopping::kNever}).ok());
  BeamSearch search({2, 1.0f, EarlyStopping::kHeuristic}, 10);
  std::vector<TestBeam> beams = {{{}, {}, 0, {{1, NAN}}}};
  EXPECT_FALSE(search.Step(View(beams), EndsAtEos).ok());
}

}  // namespace
}  // namespace tpserve
