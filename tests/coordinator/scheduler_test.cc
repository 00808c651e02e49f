// Table-driven scheduler tests: for each step, the expected plan (sequence, tokens), the running
// and waiting sets and the blocks in use, driven by a FakeKvWorker that simulates the KV cache.
#include "coordinator/scheduler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <set>

#include "tests/coordinator/scheduler_harness.h"

namespace tpserve {
namespace {

using testing_coordinator::Config;
using testing_coordinator::Iota;
using testing_coordinator::kBlockSize;
using testing_coordinator::Request;
using testing_coordinator::S;
using Harness = testing_coordinator::SchedulerHarness;
using testing_coordinator::StepExpect;

TEST(SchedulerTest, DecodesFirstThenChunkedPrefillToTheBudget) {
  Harness h(Config(/*budget=*/8), /*num_blocks=*/64);
  h.Add(Request(1, Iota(3, 10), /*max_tokens=*/4));   // A
  h.Add(Request(2, Iota(20, 50), /*max_tokens=*/2));  // B: a long prompt
  const uint64_t a = S(1), b = S(2);
  const std::vector<StepExpect> table = {
      // A's whole prompt, then B's first chunk in what is left of the budget.
      {{{a, 3}, {b, 5}}, {a, b}, {}, 1 + 2},
      // A decodes first; B's prefill continues alongside, never stalling A.
      {{{a, 1}, {b, 7}}, {a, b}, {}, 1 + 3},
      {{{a, 1}, {b, 7}}, {a, b}, {}, 2 + 5},
      // B has one prompt token left: it counts as a decode; A finishes (4 tokens).
      {{{a, 1}, {b, 1}}, {a, b}, {}, 2 + 5},
      {{{b, 1}}, {b}, {}, 6},
  };
  for (size_t i = 0; i < table.size(); ++i) h.ExpectStep(table[i], static_cast<int>(i + 1));
  EXPECT_FALSE(h.scheduler().has_unfinished());
  EXPECT_EQ(h.finished()[a].finish_reason, FinishReason::kLength);
  EXPECT_EQ(h.finished()[b].usage.num_output_tokens, 2);
  h.ExpectReferenceOutputs();
  h.ExpectNoLeaks();
}

TEST(SchedulerTest, PlanCarriesPositionsTablesAndSampleIndex) {
  Harness h(Config(8), 64);
  ScheduleRequest r = Request(1, Iota(10, 10), 3);
  r.sampling.repetition_penalty = 1.1f;
  r.sampling.seed = 7;
  h.Add(r);
  StepPlan p1 = h.scheduler().Schedule();
  ASSERT_EQ(p1.sequences.size(), 1u);
  const SequencePlan& c1 = p1.sequences[0];
  EXPECT_EQ(c1.num_cached, 0);
  EXPECT_EQ(c1.token_ids, Iota(8, 10));
  EXPECT_EQ(c1.block_table, (std::vector<int32_t>{0, 1}));
  EXPECT_FALSE(c1.needs_token);
  EXPECT_TRUE(c1.penalty_tokens.empty());  // only with a token to sample
  EXPECT_EQ(c1.sampling.seed, 7u);
  StepResult r1;
  r1.step_id = p1.step_id;
  ASSERT_TRUE(h.scheduler().Postprocess(p1, r1).ok());

  StepPlan p2 = h.scheduler().Schedule();
  ASSERT_EQ(p2.sequences.size(), 1u);
  const SequencePlan& c2 = p2.sequences[0];
  EXPECT_EQ(c2.num_cached, 8);
  EXPECT_EQ(c2.token_ids, (std::vector<int32_t>{18, 19}));
  EXPECT_EQ(c2.block_table, (std::vector<int32_t>{0, 1, 2}));
  EXPECT_TRUE(c2.needs_token);
  EXPECT_EQ(c2.sample_index, 0u);
  EXPECT_EQ(c2.penalty_tokens, Iota(10, 10));
  StepResult r2;
  r2.step_id = p2.step_id;
  r2.sequences.push_back({S(1), 123, -1.0f, {}, {}});
  auto events = h.scheduler().Postprocess(p2, r2);
  ASSERT_TRUE(events.ok());
  ASSERT_EQ(events->size(), 1u);
  EXPECT_EQ((*events)[0].token_id, 123);
  EXPECT_FALSE((*events)[0].is_finished);

  StepPlan p3 = h.scheduler().Schedule();
  ASSERT_EQ(p3.sequences.size(), 1u);
  EXPECT_EQ(p3.sequences[0].num_cached, 10);
  EXPECT_EQ(p3.sequences[0].token_ids, (std::vector<int32_t>{123}));
  EXPECT_EQ(p3.sequences[0].sample_index, 1u);
  EXPECT_GT(p3.step_id, p2.step_id);
}

TEST(SchedulerTest, PreemptsTheLatestArrivalByRecomputeAndResumesIdentically) {
  SchedulerConfig config = Config(16, 4);
  Harness h(config, /*num_blocks=*/4);
  h.Add(Request(1, Iota(7, 10), 10));  // A: needs all 4 blocks by the end
  h.Add(Request(2, Iota(7, 40), 10));  // B
  const uint64_t a = S(1), b = S(2);
  const std::vector<StepExpect> table = {
      {{{a, 7}, {b, 7}}, {a, b}, {}, 4},
      {{{a, 1}, {b, 1}}, {a, b}, {}, 4},
      // A's position 8 needs a fifth block: B (latest arrival) is preempted, A goes on alone.
      {{{a, 1}}, {a}, {b}, 3},
      // B cannot re-prefill prompt + 2 outputs (3 blocks) while A holds 3 of 4.
      {{{a, 1}}, {a}, {b}, 3},
  };
  for (size_t i = 0; i < table.size(); ++i) h.ExpectStep(table[i], static_cast<int>(i + 1));
  EXPECT_EQ(h.scheduler().FindSequence(b)->num_preemptions, 1);
  EXPECT_EQ(h.scheduler().FindSequence(b)->num_output_tokens(), 2);  // output kept
  // A runs to its 10 tokens (step 10), then B re-prefills its 9 tokens and samples its 3rd.
  for (int step = 5; step <= 10; ++step) h.Step();
  EXPECT_TRUE(h.finished().count(a));
  const StepPlan resume = h.Step();
  ASSERT_EQ(resume.sequences.size(), 1u);
  EXPECT_EQ(resume.sequences[0].seq_id, b);
  EXPECT_EQ(resume.sequences[0].num_cached, 0);
  EXPECT_EQ(resume.sequences[0].token_ids.size(), 9u);
  EXPECT_TRUE(resume.sequences[0].needs_token);
  EXPECT_EQ(resume.sequences[0].sample_index, 2u);
  h.RunToCompletion();
  EXPECT_EQ(h.scheduler().Stats().num_preemptions, 1);
  h.ExpectReferenceOutputs();
  h.ExpectNoLeaks();
}

TEST(SchedulerTest, PriorityChoosesTheVictim) {
  SchedulerConfig config = Config(16, 4);
  config.enable_priority = true;
  Harness h(config, 4);
  ScheduleRequest ra = Request(1, Iota(7, 10), 10);
  ra.priority = 5;  // A arrives first but matters less
  ScheduleRequest rb = Request(2, Iota(7, 40), 10);
  rb.priority = 1;
  h.Add(ra);
  h.Add(rb);
  const uint64_t a = S(1), b = S(2);
  const std::vector<StepExpect> table = {
      {{{b, 7}, {a, 7}}, {a, b}, {}, 4},
      {{{b, 1}, {a, 1}}, {a, b}, {}, 4},
      {{{b, 1}}, {b}, {a}, 3},
  };
  for (size_t i = 0; i < table.size(); ++i) h.ExpectStep(table[i], static_cast<int>(i + 1));
  h.RunToCompletion();
  h.ExpectReferenceOutputs();
  h.ExpectNoLeaks();
}

// The queue is bounded by the prompt tokens still to prefill too: long prompts are refused at once.
TEST(SchedulerTest, QueuedTokensAreBounded) {
  SchedulerConfig config = Config(64, 8);
  config.max_queued_tokens = 40;
  config.max_model_len = 64;
  Scheduler s(config, /*num_blocks=*/64, kBlockSize);
  EXPECT_TRUE(s.Add(Request(1, Iota(25, 0), 4)).ok());
  EXPECT_TRUE(s.Add(Request(2, Iota(15, 0), 4)).ok());  // 40 waiting: at the bound
  const Status overloaded = s.Add(Request(3, {1}, 4));
  EXPECT_EQ(overloaded.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(overloaded.message().find("40 prompt tokens already waiting (limit 40)"), std::string::npos)
      << overloaded.ToString();
  EXPECT_EQ(s.FindSequence(S(3)), nullptr);
  // Scheduling drains the count: both requests leave the queue for their first chunks.
  EXPECT_EQ(s.Schedule().sequences.size(), 2u);
  EXPECT_TRUE(s.Add(Request(3, Iota(36, 0), 4)).ok()) << "the queue never drained";  // 36 <= 40
  EXPECT_EQ(s.Add(Request(4, Iota(5, 0), 4)).code(), StatusCode::kResourceExhausted);  // 36 + 5 > 40
}

TEST(SchedulerTest, AdmissionControl) {
  SchedulerConfig config = Config(64, 8);
  config.max_queue = 3;
  config.max_model_len = 32;
  Scheduler s(config, /*num_blocks=*/6, kBlockSize);  // 24 slots

  EXPECT_EQ(s.Add(Request(1, {}, 4)).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.Add(Request(1, {1}, 0)).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.Add(Request(1, {1}, 4, 0)).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.Add(Request(1, {1}, 4, 9)).code(), StatusCode::kInvalidArgument);  // n > max_num_seqs
  EXPECT_EQ(s.Add(Request(kMaxRequestId + 1, {1}, 4)).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.Add(Request(1, Iota(30, 0), 3)).code(), StatusCode::kOutOfRange);  // 33 > 32
  EXPECT_EQ(s.Add(Request(1, Iota(20, 0), 6)).code(), StatusCode::kOutOfRange);  // 25 slots > 24
  EXPECT_TRUE(s.Add(Request(1, Iota(20, 0), 5)).ok());                           // 24 slots: fits
  EXPECT_EQ(s.Add(Request(1, {1}, 4)).code(), StatusCode::kInvalidArgument);     // id is live
  EXPECT_TRUE(s.Add(Request(2, {1}, 4, 2)).ok());
  EXPECT_EQ(s.num_waiting(), 3);
  const Status overloaded = s.Add(Request(3, {1}, 4));
  EXPECT_EQ(overloaded.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(overloaded.message().find("overloaded"), std::string::npos);
  EXPECT_EQ(s.num_waiting(), 3);  // nothing queued on error
  EXPECT_EQ(s.FindSequence(S(3)), nullptr);

  // Once the queue drains into running, new requests are taken again. (The 6 blocks hold
  // request 1's 5 and one of request 2's samples.)
  const StepPlan plan = s.Schedule();
  EXPECT_EQ(plan.sequences.size(), 2u);
  EXPECT_EQ(s.num_waiting(), 1);
  EXPECT_TRUE(s.Add(Request(3, {1}, 4)).ok());
  EXPECT_TRUE(s.Add(Request(4, {1}, 4)).ok());
  EXPECT_EQ(s.Add(Request(5, {1}, 4)).code(), StatusCode::kResourceExhausted);

  SchedulerConfig no_chunk = Config(8);
  no_chunk.enable_chunked_prefill = false;
  Scheduler s2(no_chunk, 64, kBlockSize);
  EXPECT_EQ(s2.Add(Request(1, Iota(9, 0), 4)).code(), StatusCode::kOutOfRange);
  EXPECT_TRUE(s2.Add(Request(1, Iota(8, 0), 4)).ok());
}

TEST(SchedulerTest, WithoutChunkingAPromptWaitsForAWholeBudget) {
  SchedulerConfig config = Config(8);
  config.enable_chunked_prefill = false;
  Harness h(config, 64);
  h.Add(Request(1, Iota(6, 10), 3));  // A
  h.Add(Request(2, Iota(8, 30), 2));  // C: needs the whole budget
  const uint64_t a = S(1), c = S(2);
  const std::vector<StepExpect> table = {
      {{{a, 6}}, {a}, {c}, 2},  // 2 tokens of budget left: C is not split
      {{{a, 1}}, {a}, {c}, 2},  // 7 left: still not enough, and FCFS keeps C at the head
      {{{a, 1}}, {a}, {c}, 2},  // A finishes (3 tokens)
      {{{c, 8}}, {c}, {}, 2},
  };
  for (size_t i = 0; i < table.size(); ++i) h.ExpectStep(table[i], static_cast<int>(i + 1));
  h.RunToCompletion();
  h.ExpectReferenceOutputs();
}

TEST(SchedulerTest, PrefillChunkCapsEachChunk) {
  SchedulerConfig config = Config(16);
  config.prefill_chunk = 5;
  Harness h(config, 64);
  h.Add(Request(1, Iota(12, 10), 1));
  const uint64_t a = S(1);
  const std::vector<StepExpect> table = {
      {{{a, 5}}, {a}, {}, 2},
      {{{a, 5}}, {a}, {}, 3},
      {{{a, 2}}, {a}, {}, 3},
  };
  for (size_t i = 0; i < table.size(); ++i) h.ExpectStep(table[i], static_cast<int>(i + 1));
  EXPECT_EQ(h.finished()[a].finish_reason, FinishReason::kLength);
  h.ExpectReferenceOutputs();
}

TEST(SchedulerTest, PrefixCacheHitsSkipSharedBlocks) {
  SchedulerConfig config = Config(64);
  config.enable_prefix_caching = true;
  Harness h(config, 64);
  std::vector<int32_t> prefix = Iota(16, 100);
  auto with_tail = [&](std::vector<int32_t> tail) {
    std::vector<int32_t> p = prefix;
    p.insert(p.end(), tail.begin(), tail.end());
    return p;
  };
  // Two requests arriving together both compute the prefix (nothing is computed yet to share).
  h.Add(Request(1, with_tail({1, 2, 3}), 2));
  h.Add(Request(2, with_tail({4, 5}), 2));
  StepPlan first = h.Step();
  ASSERT_EQ(first.sequences.size(), 2u);
  EXPECT_EQ(first.sequences[0].num_cached, 0);
  EXPECT_EQ(first.sequences[1].num_cached, 0);
  h.RunToCompletion();
  // A later request with the same 16-token prefix starts after it.
  h.Add(Request(3, with_tail({7, 8, 9, 10, 11}), 2));
  StepPlan third = h.Step();
  ASSERT_EQ(third.sequences.size(), 1u);
  EXPECT_EQ(third.sequences[0].num_cached, 16);
  EXPECT_EQ(third.sequences[0].token_ids, (std::vector<int32_t>{7, 8, 9, 10, 11}));
  h.RunToCompletion();
  EXPECT_EQ(h.finished()[S(3)].usage.num_cached_prompt_tokens, 16);
  EXPECT_EQ(h.finished()[S(1)].usage.num_cached_prompt_tokens, 0);
  const BlockStats stats = h.scheduler().Stats().blocks;
  EXPECT_EQ(stats.prefix_hit_tokens, 16);
  EXPECT_EQ(stats.prefix_query_tokens, 19 + 18 + 21);
  // Whose 5 full blocks are all cached now; a 20-token prompt of them still recomputes its last
  // block, for the logits of its last token.
  h.Add(Request(4, with_tail({7, 8, 9, 10}), 2));
  StepPlan fourth = h.Step();
  ASSERT_EQ(fourth.sequences.size(), 1u);
  EXPECT_EQ(fourth.sequences[0].num_cached, 16);
  EXPECT_EQ(fourth.sequences[0].token_ids, (std::vector<int32_t>{7, 8, 9, 10}));
  h.RunToCompletion();
  h.ExpectReferenceOutputs();
  h.ExpectNoLeaks();
}

TEST(SchedulerTest, SamplesForkAndCopyOnWrite) {
  SchedulerConfig config = Config(64);
  config.enable_prefix_caching = true;
  Harness h(config, 64);
  ScheduleRequest request = Request(1, Iota(6, 10), 3, /*n=*/2);
  request.sampling.seed = 7;
  h.Add(request);
  const uint64_t s0 = S(1, 0), s1 = S(1, 1);
  // Sample 0 prefills up to the last prompt token; sample 1 waits for the fork.
  StepPlan p1 = h.Step();
  ASSERT_EQ(p1.sequences.size(), 1u);
  EXPECT_EQ(p1.sequences[0].seq_id, s0);
  EXPECT_EQ(p1.sequences[0].token_ids.size(), 5u);
  EXPECT_FALSE(p1.sequences[0].needs_token);
  EXPECT_EQ(h.scheduler().FindSequence(s1)->block_table, h.scheduler().FindSequence(s0)->block_table);
  EXPECT_EQ(h.scheduler().block_manager().ref_count(0), 2);
  EXPECT_EQ(h.scheduler().block_manager().ref_count(1), 2);
  // Both compute the last prompt token; s0 writes into shared block 1, so it gets a copy.
  StepPlan p2 = h.Step();
  ASSERT_EQ(p2.sequences.size(), 2u);
  EXPECT_EQ(p2.sequences[0].seq_id, s0);
  EXPECT_EQ(p2.sequences[1].seq_id, s1);
  for (const SequencePlan& sp : p2.sequences) {
    EXPECT_EQ(sp.num_cached, 5);
    EXPECT_EQ(sp.token_ids, (std::vector<int32_t>{15}));
    EXPECT_TRUE(sp.needs_token);
    EXPECT_EQ(sp.sample_index, 0u);
  }
  EXPECT_EQ(p2.block_copies, (std::vector<std::pair<int32_t, int32_t>>{{1, 2}}));
  EXPECT_EQ(p2.sequences[0].block_table, (std::vector<int32_t>{0, 2}));
  EXPECT_EQ(p2.sequences[1].block_table, (std::vector<int32_t>{0, 1}));
  h.RunToCompletion();
  EXPECT_NE(h.outputs()[s0], h.outputs()[s1]);  // the fake worker seeds by seq id
  // The real worker draws from (seed, token index) alone: the samples must carry distinct seeds.
  EXPECT_EQ(p2.sequences[0].sampling.seed, 7u);
  EXPECT_NE(p2.sequences[1].sampling.seed, 7u);
  h.ExpectReferenceOutputs();
  h.ExpectNoLeaks();
}

TEST(SchedulerTest, SamplesForkStraightFromACachedPrompt) {
  SchedulerConfig config = Config(64);
  config.enable_prefix_caching = true;
  Harness h(config, 64);
  h.Add(Request(1, Iota(9, 10), 1));
  h.RunToCompletion();
  // The cache holds the 8 tokens before the fork point: no prefill, both samples go at once.
  h.Add(Request(2, Iota(9, 10), 2, /*n=*/3));
  StepPlan p = h.Step();
  ASSERT_EQ(p.sequences.size(), 3u);
  for (int32_t i = 0; i < 3; ++i) {
    EXPECT_EQ(p.sequences[i].seq_id, S(2, i));
    EXPECT_EQ(p.sequences[i].num_cached, 8);
    EXPECT_EQ(p.sequences[i].token_ids, (std::vector<int32_t>{18}));
  }
  EXPECT_TRUE(p.block_copies.empty());  // position 8 starts a fresh block
  h.RunToCompletion();
  h.ExpectReferenceOutputs();
  h.ExpectNoLeaks();
}

TEST(SchedulerTest, OneTokenPromptSamplesRunIndependently) {
  Harness h(Config(64), 64);
  h.Add(Request(1, {42}, 3, /*n=*/2));
  StepPlan p = h.Step();
  ASSERT_EQ(p.sequences.size(), 2u);
  h.RunToCompletion();
  h.ExpectReferenceOutputs();
  h.ExpectNoLeaks();
}

TEST(SchedulerTest, AbortFreesEverything) {
  SchedulerConfig config = Config(64);
  config.enable_prefix_caching = true;
  Harness h(config, 64);
  h.Add(Request(1, Iota(9, 10), 50));         // running
  h.Add(Request(2, Iota(9, 30), 50, /*n=*/3));  // running leader + forked samples
  h.Step();
  h.Step();
  h.Add(Request(3, Iota(5, 60), 50, /*n=*/2));  // waiting leader + pending sample
  EXPECT_EQ(h.scheduler().num_running(), 4);
  EXPECT_EQ(h.scheduler().FindSequence(S(2, 2))->status, SequenceStatus::kRunning);

  EXPECT_TRUE(h.scheduler().Abort(S(1)).ok());
  EXPECT_EQ(h.scheduler().Abort(S(1)).code(), StatusCode::kNotFound);
  EXPECT_EQ(h.scheduler().FindSequence(S(1)), nullptr);
  // Aborting a leader before its samples fork hands the prompt to the next sample.
  EXPECT_TRUE(h.scheduler().Abort(S(3, 0)).ok());
  EXPECT_EQ(h.scheduler().num_waiting(), 1);
  // Cancel between Schedule and Postprocess: the result for it is dropped.
  StepPlan plan = h.scheduler().Schedule();
  EXPECT_TRUE(h.scheduler().AbortRequest(2).ok());
  EXPECT_EQ(h.scheduler().AbortRequest(2).code(), StatusCode::kNotFound);
  auto events = h.scheduler().Postprocess(plan, h.worker().Execute(plan));
  ASSERT_TRUE(events.ok());
  for (const SequenceEvent& e : *events) EXPECT_EQ(e.request_id, 3u);
  EXPECT_TRUE(h.scheduler().AbortRequest(3).ok());
  EXPECT_FALSE(h.scheduler().has_unfinished());
  EXPECT_EQ(h.scheduler().num_running(), 0);
  EXPECT_EQ(h.scheduler().num_waiting(), 0);
  h.ExpectNoLeaks();
  EXPECT_GT(h.scheduler().Stats().blocks.num_cached, 0);  // full computed blocks stay cached
}

TEST(SchedulerTest, RequestIdReusedWhileAStepRunsIsNotConfused) {
  Harness h(Config(64), 64);
  h.Add(Request(1, Iota(5, 0), 3));
  StepPlan plan = h.scheduler().Schedule();
  ASSERT_TRUE(h.scheduler().AbortRequest(1).ok());
  ASSERT_TRUE(h.scheduler().Add(Request(1, Iota(6, 50), 2)).ok());
  auto events = h.scheduler().Postprocess(plan, h.worker().Execute(plan));
  ASSERT_TRUE(events.ok());
  EXPECT_TRUE(events->empty());
  const Sequence* seq = h.scheduler().FindSequence(S(1));
  ASSERT_NE(seq, nullptr);
  EXPECT_EQ(seq->status, SequenceStatus::kWaiting);
  EXPECT_EQ(seq->num_computed, 0);
  EXPECT_TRUE(seq->output_ids.empty());
}

TEST(SchedulerTest, StopConditions) {
  Harness h(Config(64), 64);
  const int32_t kEos = 999;
  // The fake model says EOS as the 3rd output token of every sequence, 7 as the 2nd of request 4.
  h.worker().SetNextToken([](uint64_t seq_id, const std::vector<int32_t>& context) {
    const size_t out = context.size() - 4;  // every prompt here has 4 tokens
    if (out == 2) return kEos;
    if (out == 1 && seq_id == S(4)) return 7;
    return 100 + static_cast<int32_t>(out);
  });
  auto req = [&](uint64_t id, int32_t max_tokens) {
    ScheduleRequest r = Request(id, Iota(4, 0), max_tokens);
    r.stopping.eos_token_id = kEos;
    return r;
  };
  h.Add(req(1, 10));                // stops on EOS
  ScheduleRequest ignore = req(2, 5);
  ignore.stopping.ignore_eos = true;
  h.Add(ignore);                    // runs through EOS to max_tokens
  h.Add(req(3, 2));                 // length before EOS
  ScheduleRequest stop_token = req(4, 10);
  stop_token.stopping.stop_token_ids = {7};
  h.Add(stop_token);                // stop token id
  h.RunToCompletion();
  EXPECT_EQ(h.finished()[S(1)].finish_reason, FinishReason::kStop);
  EXPECT_EQ(h.outputs()[S(1)], (std::vector<int32_t>{100, 101, kEos}));
  EXPECT_EQ(h.finished()[S(2)].finish_reason, FinishReason::kLength);
  EXPECT_EQ(h.outputs()[S(2)], (std::vector<int32_t>{100, 101, kEos, 103, 104}));
  EXPECT_EQ(h.finished()[S(3)].finish_reason, FinishReason::kLength);
  EXPECT_EQ(h.outputs()[S(3)], (std::vector<int32_t>{100, 101}));
  EXPECT_EQ(h.finished()[S(4)].finish_reason, FinishReason::kStop);
  EXPECT_EQ(h.outputs()[S(4)], (std::vector<int32_t>{100, 7}));
  // Usage and timing: one step per token at 1 s per step.
  const SequenceEvent& e = h.finished()[S(2)];
  EXPECT_EQ(e.usage.num_prompt_tokens, 4);
  EXPECT_EQ(e.usage.num_output_tokens, 5);
  EXPECT_DOUBLE_EQ(e.usage.ttft_s, 1.0);
  EXPECT_DOUBLE_EQ(e.usage.tpot_s, 1.0);
  h.ExpectNoLeaks();
}

TEST(SchedulerTest, StopsAtMaxModelLen) {
  SchedulerConfig config = Config(64);
  config.max_model_len = 10;
  Harness h(config, 64);
  h.Add(Request(1, Iota(6, 0), 4));
  h.RunToCompletion();
  EXPECT_EQ(h.outputs()[S(1)].size(), 4u);
  EXPECT_EQ(h.finished()[S(1)].finish_reason, FinishReason::kLength);
}

TEST(SchedulerTest, MismatchedResultsAreErrorsAndChangeNothing) {
  Harness h(Config(64), 64);
  h.Add(Request(1, Iota(5, 0), 3));
  h.Add(Request(2, Iota(5, 20), 3));
  StepPlan plan = h.scheduler().Schedule();
  ASSERT_EQ(plan.sequences.size(), 2u);
  StepResult good = h.worker().Execute(plan);

  StepResult wrong_step = good;
  wrong_step.step_id += 1;
  EXPECT_EQ(h.scheduler().Postprocess(plan, wrong_step).status().code(), StatusCode::kInvalidArgument);
  StepResult missing = good;
  missing.sequences.pop_back();
  EXPECT_EQ(h.scheduler().Postprocess(plan, missing).status().code(), StatusCode::kInvalidArgument);
  StepResult swapped = good;
  std::swap(swapped.sequences[0], swapped.sequences[1]);
  EXPECT_EQ(h.scheduler().Postprocess(plan, swapped).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(h.scheduler().FindSequence(S(1))->num_computed, 0);
  EXPECT_TRUE(h.scheduler().has_plan_in_flight());

  // The step is given up: its sequences start over, and the next plan recomputes them.
  h.scheduler().DiscardInFlight();
  EXPECT_FALSE(h.scheduler().has_plan_in_flight());
  EXPECT_EQ(h.scheduler().num_waiting(), 2);
  StepPlan again = h.scheduler().Schedule();
  ASSERT_EQ(again.sequences.size(), 2u);
  EXPECT_EQ(again.sequences[0].token_ids, plan.sequences[0].token_ids);
  EXPECT_EQ(again.sequences[1].token_ids, plan.sequences[1].token_ids);
  auto events = h.scheduler().Postprocess(again, h.worker().Execute(again));
  ASSERT_TRUE(events.ok());
  EXPECT_EQ(events->size(), 2u);
}

TEST(SchedulerTest, ResetKvCacheRecomputesEverything) {
  SchedulerConfig config = Config(64);
  config.enable_prefix_caching = true;
  Harness h(config, 64);
  h.Add(Request(1, Iota(9, 0), 6));
  h.Step();
  h.Step();
  h.Add(Request(2, Iota(9, 0), 6));
  h.scheduler().ResetKvCache();  // e.g. the worker group was replaced
  EXPECT_EQ(h.scheduler().num_running(), 0);
  EXPECT_EQ(h.scheduler().Stats().blocks.num_cached, 0);
  // A fresh worker (empty KV memory): everything it reads must be recomputed by the plans.
  h.worker().WipeKv();
  h.RunToCompletion();
  h.ExpectReferenceOutputs();
  h.ExpectNoLeaks();
}

}  // namespace
}  // namespace tpserve
