// The scheduler's side of prompt logprobs: which chunks ask for them (and the prompt token after
// each), that the scored positions come back to the first token's event in order, that such a
// request reads no cached prefix (but fills the cache), survives a preemption before its first
// token, and hands the same logprobs to every sample of n > 1. Driven by the FakeKvWorker, whose
// fake logprobs hash the context read back from the KV slots (tests/coordinator/fake_prompt_logprobs.h).
#include <gtest/gtest.h>

#include "tests/coordinator/fake_prompt_logprobs.h"
#include "tests/coordinator/scheduler_harness.h"

namespace tpserve {
namespace {

using testing::FakePromptLogprobsReference;
using testing_coordinator::Config;
using testing_coordinator::Iota;
using testing_coordinator::Request;
using testing_coordinator::S;
using Harness = testing_coordinator::SchedulerHarness;

ScheduleRequest ScoredRequest(uint64_t id, std::vector<int32_t> prompt, int32_t max_tokens, int32_t n = 1) {
  ScheduleRequest r = Request(id, std::move(prompt), max_tokens, n);
  r.prompt_logprobs = true;
  r.sampling.num_logprobs = 2;
  return r;
}

// The one event of seq_id that carried prompt logprobs equals the reference for `prompt`.
void ExpectPromptLogprobs(Harness& h, uint64_t seq_id, const std::vector<int32_t>& prompt) {
  ASSERT_EQ(h.prompt_logprobs()[seq_id].size(), 1u) << "seq " << seq_id;
  const SequenceEvent& event = h.prompt_logprobs()[seq_id][0];
  EXPECT_EQ(event.prompt_ids, prompt);
  const std::vector<float> expected = FakePromptLogprobsReference(prompt);
  ASSERT_EQ(event.prompt_logprobs.size(), expected.size()) << "seq " << seq_id;
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(event.prompt_logprobs[i].token_id, prompt[i + 1]) << "seq " << seq_id << " position " << i;
    EXPECT_EQ(event.prompt_logprobs[i].logprob, expected[i]) << "seq " << seq_id << " position " << i;
    EXPECT_EQ(event.prompt_logprobs[i].top_logprobs.size(), 2u);
  }
  EXPECT_EQ(h.outputs()[seq_id].size(), h.finished()[seq_id].usage.num_output_tokens);
}

TEST(SchedulerPromptLogprobsTest, ChunksAskForTheTokenAfterThemAndTheFirstEventCarriesAll) {
  SchedulerConfig config = Config(8);
  config.enable_prefix_caching = true;
  Harness h(config, 64);
  const std::vector<int32_t> prompt = Iota(19, 100);
  h.Add(ScoredRequest(1, prompt, 3));
  h.Add(Request(2, Iota(5, 300), 3));  // unscored, beside it
  const StepPlan p1 = h.Step();  // A: 8 tokens
  ASSERT_EQ(p1.sequences.size(), 1u);
  EXPECT_TRUE(p1.sequences[0].prompt_logprobs);
  EXPECT_EQ(p1.sequences[0].next_prompt_token, prompt[8]);
  EXPECT_EQ(p1.sequences[0].num_prompt_logprobs(), 8);
  EXPECT_FALSE(p1.sequences[0].needs_token);
  const StepPlan p2 = h.Step();  // A: 8 more
  EXPECT_EQ(p2.sequences[0].next_prompt_token, prompt[16]);
  const StepPlan p3 = h.Step();  // A: its last 3 (2 scored, the last samples), then B's prefill
  ASSERT_EQ(p3.sequences.size(), 2u);
  EXPECT_TRUE(p3.sequences[0].prompt_logprobs);
  EXPECT_EQ(p3.sequences[0].next_prompt_token, -1);
  EXPECT_EQ(p3.sequences[0].num_prompt_logprobs(), 2);
  EXPECT_TRUE(p3.sequences[0].needs_token);
  EXPECT_FALSE(p3.sequences[1].prompt_logprobs);
  EXPECT_TRUE(h.prompt_logprobs()[S(1)].size() == 1u);
  const StepPlan p4 = h.Step();  // decodes ask for nothing
  for (const SequencePlan& sp : p4.sequences) EXPECT_FALSE(sp.prompt_logprobs);
  h.RunToCompletion();
  ExpectPromptLogprobs(h, S(1), prompt);
  EXPECT_TRUE(h.prompt_logprobs()[S(2)].empty());
  h.ExpectReferenceOutputs();
  h.ExpectNoLeaks();
}

TEST(SchedulerPromptLogprobsTest, ReadsNoCachedPrefixButFillsTheCache) {
  SchedulerConfig config = Config(64);
  config.enable_prefix_caching = true;
  Harness h(config, 64);
  const std::vector<int32_t> prompt = Iota(18, 7);
  h.Add(Request(1, prompt, 2));
  h.RunToCompletion();
  // The cache holds 16 of its tokens; the scored request computes all 18 anyway.
  h.Add(ScoredRequest(2, prompt, 2));
  const StepPlan scored = h.Step();
  ASSERT_EQ(scored.sequences.size(), 1u);
  EXPECT_EQ(scored.sequences[0].num_cached, 0);
  EXPECT_EQ(scored.sequences[0].token_ids.size(), 18u);
  h.RunToCompletion();
  EXPECT_EQ(h.finished()[S(2)].usage.num_cached_prompt_tokens, 0);
  ExpectPromptLogprobs(h, S(2), prompt);
  const int64_t queried = h.scheduler().Stats().blocks.prefix_query_tokens;
  // A later unscored request hits the cache (filled by both), and counts as a query.
  h.Add(Request(3, prompt, 2));
  const StepPlan hit = h.Step();
  EXPECT_EQ(hit.sequences[0].num_cached, 16);
  h.RunToCompletion();
  EXPECT_EQ(h.finished()[S(3)].usage.num_cached_prompt_tokens, 16);
  EXPECT_EQ(h.scheduler().Stats().blocks.prefix_query_tokens, queried + 18);
  h.ExpectReferenceOutputs();
  h.ExpectNoLeaks();
}

TEST(SchedulerPromptLogprobsTest, PreemptedBeforeItsFirstTokenScoresAgain) {
  Harness h(Config(6), 64);
  const std::vector<int32_t> prompt = Iota(15, 40);
  h.Add(ScoredRequest(1, prompt, 3));
  h.Step();  // 6 scored
  const StepPlan lost = h.scheduler().Schedule();  // the next chunk never runs: preempted
  ASSERT_EQ(lost.sequences.size(), 1u);
  EXPECT_EQ(lost.sequences[0].num_cached, 6);
  h.scheduler().DiscardInFlight();
  const StepPlan again = h.Step();
  EXPECT_EQ(again.sequences[0].num_cached, 0);
  EXPECT_TRUE(again.sequences[0].prompt_logprobs);
  h.RunToCompletion();
  ExpectPromptLogprobs(h, S(1), prompt);
  h.ExpectReferenceOutputs();
  h.ExpectNoLeaks();
}

TEST(SchedulerPromptLogprobsTest, EverySampleOfNGetsTheLeadersLogprobs) {
  SchedulerConfig config = Config(64);
  config.enable_prefix_caching = true;
  Harness h(config, 64);
  const std::vector<int32_t> prompt = Iota(10, 3);
  ScheduleRequest request = ScoredRequest(1, prompt, 3, /*n=*/3);
  request.sampling.seed = 5;
  h.Add(request);
  const StepPlan lead = h.Step();  // sample 0 scores positions 0..8, up to the fork
  ASSERT_EQ(lead.sequences.size(), 1u);
  EXPECT_EQ(lead.sequences[0].num_prompt_logprobs(), 9);
  EXPECT_EQ(lead.sequences[0].next_prompt_token, prompt[9]);
  const StepPlan forked = h.Step();  // each sample computes the last prompt token: nothing to score
  ASSERT_EQ(forked.sequences.size(), 3u);
  for (const SequencePlan& sp : forked.sequences) EXPECT_FALSE(sp.prompt_logprobs);
  h.RunToCompletion();
  for (int32_t i = 0; i < 3; ++i) ExpectPromptLogprobs(h, S(1, i), prompt);
  h.ExpectReferenceOutputs();
  h.ExpectNoLeaks();
}

TEST(SchedulerPromptLogprobsTest, OneTokenPromptHasNothingToScore) {
  Harness h(Config(64), 64);
  h.Add(ScoredRequest(1, {42}, 2, /*n=*/2));
  const StepPlan p = h.Step();
  for (const SequencePlan& sp : p.sequences) EXPECT_FALSE(sp.prompt_logprobs);
  h.RunToCompletion();
  ExpectPromptLogprobs(h, S(1, 0), {42});
  ExpectPromptLogprobs(h, S(1, 1), {42});
}

TEST(SchedulerPromptLogprobsTest, ResultsThatDoNotMatchAreRefused) {
  Harness h(Config(64), 64);
  const std::vector<int32_t> prompt = Iota(6, 20);
  h.Add(ScoredRequest(1, prompt, 2));
  const StepPlan plan = h.scheduler().Schedule();
  const StepResult good = h.worker().Execute(plan);
  ASSERT_EQ(good.prompt_logprobs.size(), 1u);
  StepResult missing = good;
  missing.prompt_logprobs.clear();
  EXPECT_EQ(h.scheduler().Postprocess(plan, missing).status().code(), StatusCode::kInvalidArgument);
  StepResult short_one = good;
  short_one.prompt_logprobs[0].positions.pop_back();
  EXPECT_EQ(h.scheduler().Postprocess(plan, short_one).status().code(), StatusCode::kInvalidArgument);
  StepResult wrong_token = good;
  wrong_token.prompt_logprobs[0].positions[2].token_id += 1;
  EXPECT_EQ(h.scheduler().Postprocess(plan, wrong_token).status().code(), StatusCode::kInvalidArgument);
  StepResult extra = good;
  extra.prompt_logprobs.push_back(good.prompt_logprobs[0]);
  EXPECT_EQ(h.scheduler().Postprocess(plan, extra).status().code(), StatusCode::kInvalidArgument);
  auto events = h.scheduler().Postprocess(plan, good);
  ASSERT_TRUE(events.ok()) << events.status().ToString();
  ASSERT_EQ(events->size(), 1u);
  EXPECT_TRUE((*events)[0].has_prompt_logprobs);
  EXPECT_EQ((*events)[0].prompt_logprobs.size(), 5u);
}

}  // namespace
}  // namespace tpserve
