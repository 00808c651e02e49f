// Speculative decoding in the scheduler, against the FakeKvWorker: prompt lookup, a draft model
// (the fake's own, reading its context back from its own slots), adaptive k, the verify rows, and
// the rollback of rejected proposals. With speculation on, every sample must
// produce exactly its solo tokens, hold the blocks and hashes plain decoding holds at the same
// computed tokens, and leak nothing.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <utility>

#include "coordinator/speculation.h"
#include "tests/coordinator/scheduler_harness.h"

namespace tpserve {
namespace {

using testing_coordinator::Config;
using testing_coordinator::FakeRepetitiveDraft;
using testing_coordinator::FakeRepetitiveToken;
using testing_coordinator::Request;
using testing_coordinator::S;
using testing_coordinator::SchedulerHarness;

SpeculativeConfig Ngram(int32_t k) {
  SpeculativeConfig c;
  c.method = SpeculativeMethod::kNgram;
  c.num_tokens = k;
  return c;
}

SpeculativeConfig DraftModel(int32_t k) {
  SpeculativeConfig c = Ngram(k);
  c.method = SpeculativeMethod::kDraft;
  return c;
}

SchedulerConfig WithDraftModel(SchedulerConfig config) {
  config.has_draft_model = true;
  return config;
}

// ProposeNgram over tokens split into prompt and output at every point: all splits must agree.
std::vector<int32_t> Propose(const std::vector<int32_t>& tokens, int32_t k, int32_t min_ngram, int32_t max_ngram) {
  const std::vector<int32_t> whole = ProposeNgram(tokens, {}, k, min_ngram, max_ngram);
  for (size_t split = 0; split < tokens.size(); ++split) {
    const std::vector<int32_t> prompt(tokens.begin(), tokens.begin() + split);
    const std::vector<int32_t> output(tokens.begin() + split, tokens.end());
    EXPECT_EQ(ProposeNgram(prompt, output, k, min_ngram, max_ngram), whole) << "split at " << split;
  }
  return whole;
}

TEST(ProposeNgramTest, LongestSuffixLatestOccurrence) {
  // Suffix [7 8 9] occurs at 1 (followed by 4 5) and [8 9] later at 6 (followed by 1): longest wins.
  const std::vector<int32_t> tokens = {3, 7, 8, 9, 4, 5, 8, 9, 1, 7, 8, 9};
  EXPECT_EQ(Propose(tokens, 2, 1, 4), (std::vector<int32_t>{4, 5}));
  // With n <= 2 the latest occurrence of [8 9] is at 6.
  EXPECT_EQ(Propose(tokens, 3, 1, 2), (std::vector<int32_t>{1, 7, 8}));
  // The latest occurrence with k tokens after it, else the earliest.
  const std::vector<int32_t> twice = {1, 2, 9, 1, 2, 8, 1, 2};
  EXPECT_EQ(Propose(twice, 2, 1, 4), (std::vector<int32_t>{8, 1}));
  EXPECT_EQ(Propose(twice, 4, 1, 4), (std::vector<int32_t>{9, 1, 2, 8}));
  // The proposal stops where the tokens end.
  EXPECT_EQ(Propose({5, 6, 5}, 4, 1, 4), (std::vector<int32_t>{6, 5}));
  EXPECT_TRUE(Propose({1, 2, 3, 4}, 4, 1, 4).empty());
  EXPECT_TRUE(Propose({1, 2, 1}, 0, 1, 4).empty());
  EXPECT_TRUE(Propose({1, 2, 1}, 3, 2, 4).empty());  // only a 1-gram recurs
  EXPECT_TRUE(Propose({}, 3, 1, 4).empty());
}

TEST(SpeculativeConfigTest, ParsesAndRefuses) {
  auto four = ParseSpeculativeConfig("ngram:4");
  ASSERT_TRUE(four.ok());
  EXPECT_EQ(four->method, SpeculativeMethod::kNgram);
  EXPECT_EQ(four->num_tokens, 4);
  EXPECT_EQ(SpeculativeConfigName(*four), "ngram:4");
  EXPECT_EQ(ParseSpeculativeConfig("ngram")->num_tokens, 4);
  EXPECT_FALSE(ParseSpeculativeConfig("off")->enabled());
  EXPECT_EQ(SpeculativeConfigName(*ParseSpeculativeConfig("off")), "off");
  auto draft = ParseSpeculativeConfig("draft:6");
  ASSERT_TRUE(draft.ok());
  EXPECT_EQ(draft->method, SpeculativeMethod::kDraft);
  EXPECT_EQ(draft->num_tokens, 6);
  EXPECT_EQ(SpeculativeConfigName(*draft), "draft:6");
  EXPECT_EQ(ParseSpeculativeConfig("draft")->num_tokens, 4);
  for (const char* bad : {"ngram:0", "ngram:17", "ngram:x", "ngram:4x", "draft:0", "draft:", "drafts", "eagle"}) {
    auto parsed = ParseSpeculativeConfig(bad);
    EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument) << bad;
  }
}

TEST(SpeculationStateTest, GrowsOnFullAcceptanceShrinksOnMisses) {
  SpeculationState s;
  s.k = 4;
  s.OnVerified(4, 4, 4);
  EXPECT_EQ(s.k, 4);
  s.OnVerified(4, 1, 4);
  EXPECT_EQ(s.k, 2);
  s.OnVerified(2, 0, 4);
  EXPECT_EQ(s.k, 1);
  s.OnVerified(1, 1, 4);
  EXPECT_EQ(s.k, 2);
  EXPECT_EQ(s.num_verify_steps, 4);
  EXPECT_EQ(s.num_draft_tokens, 11);
  EXPECT_EQ(s.num_accepted_tokens, 6);
}

TEST(SpeculationStateTest, PausesWhenMostlyWrongAndResumesOnRightShadows) {
  // Each proposal moves the estimate a fifth of the way to its outcome.
  SpeculationState s;
  s.k = 4;
  const double floor = SpeculationState::kMinAcceptance;
  EXPECT_FALSE(s.is_paused(floor));
  s.OnVerified(4, 2, 4);  // 0.8^4 * 1 + (1 - 0.8^4) * 0.5 = 0.7048
  EXPECT_NEAR(s.acceptance, 0.7048, 1e-12);
  EXPECT_FALSE(s.is_paused(floor));
  s.OnVerified(3, 0, 4);  // 0.8^3 * 0.7048 = 0.36086
  EXPECT_TRUE(s.is_paused(floor));
  s.OnShadow(false);      // -> 0.28869
  EXPECT_TRUE(s.is_paused(floor));
  s.OnShadow(true);       // -> 0.43095
  s.OnShadow(true);       // -> 0.54476
  EXPECT_TRUE(s.is_paused(floor));
  s.OnShadow(true);       // -> 0.63581
  EXPECT_FALSE(s.is_paused(floor));
  EXPECT_TRUE(s.is_paused(0.9)) << "a dearer step needs more";
}

// A model the proposer cannot predict: after a few wrong proposals the sequence stops verifying
// any (paused) and still produces its solo tokens.
TEST(SchedulerSpeculationTest, StopsProposingWhereProposalsAreWrong) {
  SchedulerHarness h(Config(64), 64);
  // 1, then a token never seen before, then 1, ...: after each 1 the proposal (what followed an
  // earlier 1) is wrong.
  h.worker().SetNextToken([](uint64_t, const std::vector<int32_t>& context) {
    return context.size() % 2 == 0 ? 1 : 100 + static_cast<int32_t>(context.size());
  });
  ScheduleRequest r = Request(1, {1, 2, 3, 4}, 120);
  r.speculative = Ngram(4);
  h.Add(r);
  h.RunToCompletion();
  h.ExpectReferenceOutputs();
  const SchedulerStats stats = h.scheduler().Stats();
  EXPECT_GT(stats.num_draft_tokens, 0);
  EXPECT_LT(stats.num_draft_tokens, 30) << "kept proposing for all 120 tokens";
}

// The pause follows the group's measured step cost (coordinator/step_cost.h). With a = 11 ms and
// b = 16 ms per position (this CPU's figures), a draft right 19 times in 20 pays alone (break-even
// acceptance 0.59), and one right 9 times in 10 does not pay in a batch of 16 decodes (0.96). Time
// is counted from the plans at that cost: speculation must beat plain decoding alone, and in the
// batch the cost-aware pause must beat speculating on without it (the worker reporting no step
// time leaves the fixed 0.6 break-even) and stay near plain decoding. The tokens are the solo ones
// every time.
TEST(SchedulerSpeculationTest, PausesWhereTheStepCostSaysProposalsDoNotPay) {
  enum class Mode { kPlain, kCostBlind, kCostAware };
  auto simulated_ms = [](int num_requests, Mode mode, int wrong_one_in) {
    SchedulerHarness h(WithDraftModel(Config(/*budget=*/256, /*max_num_seqs=*/16)), 1024);
    h.worker().SetNextToken(FakeRepetitiveToken);
    h.worker().SetDraftModel([wrong_one_in](uint64_t seq_id, const std::vector<int32_t>& context) {
      const int32_t right = FakeRepetitiveToken(seq_id, context);
      return testing_coordinator::FakeNextToken(seq_id, context) % wrong_one_in == 0 ? right % 24 + 1 : right;
    });
    if (mode == Mode::kCostAware) h.worker().SetStepCost(11, 16);
    for (int id = 1; id <= num_requests; ++id) {
      ScheduleRequest r = Request(id, {3, static_cast<int32_t>(id % 24) + 1, 5}, 200);
      if (mode != Mode::kPlain) r.speculative = DraftModel(4);
      h.Add(r);
    }
    double ms = 0;
    while (h.scheduler().has_unfinished()) {
      const StepPlan plan = h.Step();
      int64_t positions = 0;
      for (const SequencePlan& sp : plan.sequences) positions += sp.token_ids.size() + sp.num_proposals;
      if (!plan.sequences.empty()) ms += 11 + 16.0 * positions;
    }
    h.ExpectReferenceOutputs();
    h.ExpectNoLeaks();
    return ms;
  };
  // Alone, a draft right 19 times in 20: less time than plain decoding (measured 0.90x, the steps that
  // explore the cost included).
  EXPECT_LT(simulated_ms(1, Mode::kCostAware, 20), 0.93 * simulated_ms(1, Mode::kPlain, 20));
  // Batched, right 9 times in 10: speculating regardless costs 10 % more than plain decoding, the
  // cost-aware pause 3 % (probes, and the steps before the cost is known).
  const double plain = simulated_ms(16, Mode::kPlain, 10), aware = simulated_ms(16, Mode::kCostAware, 10);
  EXPECT_LT(aware, 0.97 * simulated_ms(16, Mode::kCostBlind, 10));
  EXPECT_LT(aware, 1.05 * plain);
}

TEST(SchedulerSpeculationTest, RefusesABadConfig) {
  Scheduler scheduler(Config(64), 64, 4);
  ScheduleRequest r = Request(1, {1, 2, 3}, 8);
  r.speculative = Ngram(kMaxSpeculativeTokens + 1);
  EXPECT_EQ(scheduler.Add(r).code(), StatusCode::kInvalidArgument);
  r.speculative = DraftModel(4);  // the group has no draft model
  EXPECT_EQ(scheduler.Add(r).code(), StatusCode::kInvalidArgument);
  Scheduler drafting(WithDraftModel(Config(64)), 64, 4);
  EXPECT_TRUE(drafting.Add(r).ok());
}

// The draft model proposes, the worker verifies, the scheduler keeps the right ones: the solo
// tokens, in fewer steps, with the draft reading every position of each context from its own K/V.
TEST(SchedulerSpeculationTest, DraftModelProposalsKeepTheSoloTokens) {
  SchedulerHarness h(WithDraftModel(Config(64)), 64);
  h.worker().SetNextToken(FakeRepetitiveToken);
  h.worker().SetDraftModel(FakeRepetitiveDraft);
  ScheduleRequest r = Request(1, {5, 9, 2, 5, 9, 2, 5, 9, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 1}, 60);
  r.speculative = DraftModel(4);
  h.Add(r);
  h.Add(Request(2, {3, 1, 4, 1, 5}, 30));  // plain, in the same steps
  h.RunToCompletion();
  h.ExpectReferenceOutputs();
  h.ExpectNoLeaks();
  const SchedulerStats stats = h.scheduler().Stats();
  EXPECT_GT(stats.num_accepted_tokens, 0);
  EXPECT_LT(stats.num_accepted_tokens, stats.num_draft_tokens) << "FakeRepetitiveDraft is wrong at times";
  EXPECT_EQ(h.worker().num_draft_rows(), stats.num_draft_tokens);
  EXPECT_LT(h.worker().num_steps(), 1 + 60);
  // The draft read the prompt with its prefill, and the tokens since its last proposal at each one after.
  EXPECT_GT(h.worker().num_draft_reads(), 0);
  const SequenceEvent& finish = h.finished().at(S(1));
  EXPECT_EQ(finish.usage.num_draft_tokens, stats.num_draft_tokens);
  EXPECT_EQ(finish.usage.num_accepted_tokens, stats.num_accepted_tokens);
  EXPECT_EQ(h.finished().at(S(2)).usage.num_draft_tokens, 0);
}

// A prompt that repeats: its tokens follow themselves, so a model that copies is predicted well.
TEST(SchedulerSpeculationTest, VerifiesProposalsAndKeepsTheSoloTokens) {
  SchedulerHarness h(Config(64), 64);
  h.worker().SetNextToken(FakeRepetitiveToken);
  ScheduleRequest r = Request(1, {5, 9, 2, 5, 9, 2, 5, 9}, 40);
  r.speculative = Ngram(4);
  h.Add(r);
  h.RunToCompletion();
  h.ExpectReferenceOutputs();
  h.ExpectNoLeaks();
  const SchedulerStats stats = h.scheduler().Stats();
  EXPECT_GT(stats.num_verify_steps, 0);
  EXPECT_GT(stats.num_accepted_tokens, 0);
  EXPECT_LE(stats.num_accepted_tokens, stats.num_draft_tokens);
  EXPECT_EQ(h.worker().num_draft_rows(), stats.num_draft_tokens);
  // Fewer steps than tokens: some steps kept more than one.
  EXPECT_LT(h.worker().num_steps(), 1 + 40);
  const SequenceEvent& finish = h.finished().at(S(1));
  EXPECT_EQ(finish.usage.num_draft_tokens, stats.num_draft_tokens);
  EXPECT_EQ(finish.usage.num_accepted_tokens, stats.num_accepted_tokens);
  EXPECT_EQ(finish.usage.num_output_tokens, 40);
}

TEST(SchedulerSpeculationTest, NeverProposesPastMaxTokens) {
  SchedulerHarness h(Config(64), 64);
  h.worker().SetNextToken([](uint64_t, const std::vector<int32_t>& context) { return context.back(); });
  ScheduleRequest r = Request(1, {3, 3, 3}, 6);  // the model repeats 3 forever: every proposal is right
  r.speculative = Ngram(8);
  h.Add(r);
  int32_t produced = 0;
  while (h.scheduler().has_unfinished()) {
    const StepPlan plan = h.Step();
    for (const SequencePlan& sp : plan.sequences) {
      EXPECT_LE(produced + 1 + sp.num_draft_tokens, 6) << "rows past max_tokens";
      if (sp.needs_token) produced += 1 + sp.num_draft_tokens;
    }
  }
  EXPECT_EQ(h.outputs().at(S(1)), std::vector<int32_t>(6, 3));
  EXPECT_EQ(h.finished().at(S(1)).finish_reason, FinishReason::kLength);
  EXPECT_GT(h.finished().at(S(1)).usage.num_accepted_tokens, 0);
  EXPECT_EQ(h.finished().at(S(1)).usage.num_accepted_tokens, h.finished().at(S(1)).usage.num_draft_tokens);  // all right
}

TEST(SchedulerSpeculationTest, StopTokenInsideTheAcceptedRunEndsThere) {
  SchedulerHarness h(Config(64), 64);
  // Counts 1, 2, 3, ... from the last token: a prompt of 1..9 then 1 predicts 2, 3, 4, ... exactly.
  h.worker().SetNextToken([](uint64_t, const std::vector<int32_t>& context) { return context.back() % 9 + 1; });
  ScheduleRequest r = Request(1, {1, 2, 3, 4, 5, 6, 7, 8, 9, 1}, 30);
  r.speculative = Ngram(8);
  r.stopping.stop_token_ids = {6};
  h.Add(r);
  h.RunToCompletion();
  EXPECT_EQ(h.outputs().at(S(1)), (std::vector<int32_t>{2, 3, 4, 5, 6}));
  EXPECT_EQ(h.finished().at(S(1)).finish_reason, FinishReason::kStop);
  EXPECT_GT(h.scheduler().Stats().num_accepted_tokens, 0);
  h.ExpectNoLeaks();
}

// What one sequence holds at each count of computed tokens: logical blocks and block hashes.
using Holdings = std::map<std::pair<uint64_t, int32_t>, std::pair<int32_t, std::vector<uint64_t>>>;

Holdings RunAndRecord(SpeculativeMethod method, int64_t* num_cached_at_end) {
  const bool speculate = method != SpeculativeMethod::kOff;
  SchedulerConfig config = Config(/*budget=*/256, /*max_num_seqs=*/8);  // no chunking to differ
  config.enable_prefix_caching = true;
  config.has_draft_model = true;
  SchedulerHarness h(config, 256);
  h.worker().SetNextToken(FakeRepetitiveToken);
  h.worker().SetDraftModel(FakeRepetitiveDraft);
  std::mt19937 rng(5);
  for (uint64_t id = 1; id <= 6; ++id) {
    std::vector<int32_t> prompt(3 + id * 2);
    for (int32_t& t : prompt) t = std::uniform_int_distribution<int>(1, 24)(rng);
    ScheduleRequest r = Request(id, prompt, 20 + static_cast<int32_t>(id) * 5);
    if (speculate && id % 3 != 0) r.speculative = Ngram(static_cast<int32_t>(id % 4) + 2);  // some plain
    r.speculative.method = r.speculative.enabled() ? method : SpeculativeMethod::kOff;
    h.Add(r);
  }
  Holdings holdings;
  while (h.scheduler().has_unfinished()) {
    h.Step();
    for (const Sequence* seq : h.LiveSequences()) {
      if (seq->status != SequenceStatus::kRunning) continue;
      holdings[{seq->seq_id, seq->num_computed}] = {h.scheduler().block_manager().NumLogicalBlocks(*seq),
                                                   seq->block_hashes};
    }
  }
  h.ExpectReferenceOutputs();
  h.ExpectNoLeaks();
  *num_cached_at_end = h.scheduler().Stats().blocks.num_cached;
  if (speculate) {
    EXPECT_GT(h.scheduler().Stats().num_accepted_tokens, 0);
  }
  return holdings;
}

TEST(SchedulerSpeculationTest, RollbackHoldsWhatPlainDecodingHolds) {
  int64_t plain_cached = 0;
  const Holdings plain = RunAndRecord(SpeculativeMethod::kOff, &plain_cached);
  for (SpeculativeMethod method : {SpeculativeMethod::kNgram, SpeculativeMethod::kDraft}) {
  SCOPED_TRACE(SpeculativeConfigName({method, 4}));
  int64_t spec_cached = 0;
  const Holdings spec = RunAndRecord(method, &spec_cached);
  ASSERT_FALSE(spec.empty());
  for (const auto& [key, held] : spec) {
    auto it = plain.find(key);
    ASSERT_NE(it, plain.end()) << "seq " << key.first << " at " << key.second << " computed: plain never was";
    EXPECT_EQ(held.first, it->second.first) << "blocks of seq " << key.first << " at " << key.second;
    EXPECT_EQ(held.second, it->second.second) << "hashes of seq " << key.first << " at " << key.second;
  }
  EXPECT_EQ(spec_cached, plain_cached);  // the same full blocks end up in the prefix cache
  }
}

// The seeded workload of scheduler_workload_test, with a third of the requests speculating by prompt
// lookup and a third by the draft model, over a model that repeats itself: preemptions, forks,
// prefix hits, windows and cancellations included.
TEST(SchedulerSpeculationTest, MixedWorkloadsKeepSoloOutputsAndLeakNothing) {
  SchedulerConfig tight = WithDraftModel(Config(/*budget=*/32, /*max_num_seqs=*/8));
  tight.max_queue = 1000;
  tight.max_model_len = 64;
  tight.enable_prefix_caching = true;
  KvGroups window;
  window.sliding = {true, false};
  window.window = 6;
  struct Case {
    const char* name;
    int32_t num_blocks;
    KvGroups groups;
  };
  int64_t accepted = 0, preemptions = 0, draft_reads = 0;
  for (const Case& c : {Case{"tight", 16, {}}, Case{"roomy", 512, {}}, Case{"window", 40, window}}) {
    for (uint32_t seed = 1; seed <= 3; ++seed) {
      SCOPED_TRACE(std::string(c.name) + " seed " + std::to_string(seed));
      std::mt19937 rng(seed);
      auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
      SchedulerHarness h(tight, c.num_blocks, c.groups);
      h.worker().SetNextToken(FakeRepetitiveToken);
      h.worker().SetDraftModel(FakeRepetitiveDraft);
      for (int id = 1; id <= 30; ++id) {
        std::vector<int32_t> prompt(uniform(1, 20));
        for (int32_t& t : prompt) t = uniform(1, 24);
        ScheduleRequest r = Request(id, prompt, uniform(1, 30), uniform(0, 4) == 0 ? 2 : 1);
        r.stopping.eos_token_id = 7;
        r.stopping.ignore_eos = uniform(0, 1) == 1;
        const int method = uniform(0, 2);
        if (method > 0) r.speculative = method == 1 ? Ngram(uniform(1, 6)) : DraftModel(uniform(1, 6));
        h.Add(r);
        if (uniform(0, 2) == 0) h.Step();
        if (uniform(0, 29) == 0) (void)h.scheduler().AbortRequest(static_cast<uint64_t>(uniform(1, id)));
      }
      h.RunToCompletion();
      h.ExpectReferenceOutputs();
      h.ExpectNoLeaks();
      accepted += h.scheduler().Stats().num_accepted_tokens;
      preemptions += h.scheduler().Stats().num_preemptions;
      draft_reads += h.worker().num_draft_reads();
    }
  }
  EXPECT_GT(accepted, 0);
  EXPECT_GT(preemptions, 0);
  EXPECT_GT(draft_reads, 0);
}

}  // namespace
}  // namespace tpserve
