// Beam search end to end in one process: the Scheduler's beams on a real ModelExecutor (TP 1, and TP 2
// over a thread group), against an exhaustive reference beam search written plainly here, which
// recomputes every hypothesis from scratch with the float64 reference model (tests/testing/
// reference_llama.h) and applies Hugging Face's rules itself (no code shared with coordinator/
// beam_search.cc).
//
// What would fail if beam search were wrong:
//  - the hypotheses' ids differ from the reference's (ranking, ending, length penalty or early
//    stopping rules, forks that read another beam's K/V, a copy-on-write missed);
//  - width 1 with early stopping differs from greedy decoding;
//  - the KV blocks in use exceed what the live hypotheses hold, or are not 0 after the request;
//  - a KV pool small enough to preempt parked beams changes the result;
//  - a request handed to another scheduler mid-search (a lost group) ends with other hypotheses;
//  - TP 2 gives other ids or scores than TP 1.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>
#include <set>

#include "coordinator/scheduler.h"
#include "tests/testing/reference_llama.h"
#include "tests/testing/thread_communicator.h"
#include "tests/worker/engine_test_util.h"
#include "worker/local_generate.h"

namespace tpserve::testing {
namespace {

constexpr int32_t kBlockSize = 4;

struct Result {
  std::vector<int32_t> ids;
  double score = 0;
  bool ended = false;
  bool operator==(const Result& o) const { return ids == o.ids && score == o.score && ended == o.ended; }
};

struct Case {
  int32_t width;
  float length_penalty;
  EarlyStopping early_stopping;
  int32_t n;
};

std::string Name(const Case& c) {
  const char* es[] = {"heuristic", "when_full", "never"};
  return "width " + std::to_string(c.width) + " penalty " + std::to_string(c.length_penalty) + " " +
         es[static_cast<int>(c.early_stopping)] + " n " + std::to_string(c.n);
}

// ---- The reference: every hypothesis recomputed by the float64 model, the rules written out again.

std::vector<std::pair<double, int32_t>> ReferenceTop(const ReferenceLlama& ref, const std::vector<int32_t>& tokens,
                                                     int32_t k) {
  const int64_t V = ref.config().vocab_size;
  const std::vector<double> logits = ref.Forward(tokens);
  const double* last = logits.data() + (tokens.size() - 1) * V;
  const double max = *std::max_element(last, last + V);
  double sum = 0;
  for (int64_t v = 0; v < V; ++v) sum += std::exp(last[v] - max);
  std::vector<std::pair<double, int32_t>> all;
  for (int64_t v = 0; v < V; ++v) all.push_back({last[v] - max - std::log(sum), static_cast<int32_t>(v)});
  std::sort(all.begin(), all.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  });
  all.resize(k);
  return all;
}

std::vector<Result> ReferenceBeamSearch(const ReferenceLlama& ref, const std::vector<int32_t>& prompt, const Case& c,
                                        int32_t max_tokens, int32_t eos) {
  struct Hyp {
    std::vector<int32_t> out;
    double cum = 0;
  };
  const int32_t W = c.width;
  auto score = [&](double cum, int32_t length) { return cum / std::pow(std::max(length, 1), c.length_penalty); };
  std::vector<std::pair<double, Result>> finished;  // (score, result), best first, at most W
  auto keep = [&](const Hyp& h, bool ended) {
    const int32_t length = static_cast<int32_t>(h.out.size()) - (ended ? 1 : 0);
    Result r{h.out, score(h.cum, length), ended};
    size_t at = 0;
    while (at < finished.size() && finished[at].first >= r.score) ++at;
    finished.insert(finished.begin() + at, {r.score, r});
    if (static_cast<int32_t>(finished.size()) > W) finished.pop_back();
  };
  std::vector<Hyp> live = {Hyp{}};
  for (int32_t length = 1;; ++length) {
    struct Cand {
      double cum;
      int32_t beam, rank, token;
    };
    std::vector<Cand> cands;
    for (int32_t b = 0; b < static_cast<int32_t>(live.size()); ++b) {
      std::vector<int32_t> tokens = prompt;
      tokens.insert(tokens.end(), live[b].out.begin(), live[b].out.end());
      const auto top = ReferenceTop(ref, tokens, 2 * W);
      for (int32_t r = 0; r < 2 * W; ++r) cands.push_back({live[b].cum + top[r].first, b, r, top[r].second});
    }
    std::stable_sort(cands.begin(), cands.end(), [](const Cand& a, const Cand& b) { return a.cum > b.cum; });
    cands.resize(2 * W);
    std::vector<Hyp> next;
    for (int32_t i = 0; i < 2 * W && static_cast<int32_t>(next.size()) < W; ++i) {
      Hyp h = live[cands[i].beam];
      h.out.push_back(cands[i].token);
      h.cum = cands[i].cum;
      if (cands[i].token == eos) {
        if (i < W) keep(h, true);
      } else {
        next.push_back(h);
      }
    }
    bool done = next.empty();
    if (!done && static_cast<int32_t>(finished.size()) == W) {
      const double worst = finished.back().first;
      if (c.early_stopping == EarlyStopping::kWhenFull) done = true;
      if (c.early_stopping == EarlyStopping::kHeuristic) done = worst >= score(next[0].cum, length);
      if (c.early_stopping == EarlyStopping::kNever) {
        done = worst >= score(next[0].cum, c.length_penalty > 0 ? max_tokens : length);
      }
    }
    if (!done && length >= max_tokens) {
      for (const Hyp& h : next) keep(h, false);
      done = true;
    }
    if (done) break;
    live = next;
  }
  std::vector<Result> best;
  for (int32_t i = 0; i < c.n && i < static_cast<int32_t>(finished.size()); ++i) best.push_back(finished[i].second);
  return best;
}

// ---- The engine: the Scheduler's beams on an executor, step by step.

struct EngineRun {
  std::vector<Result> results;
  int32_t max_blocks_in_use = 0;
  int32_t blocks_in_use_after = -1;
  int64_t preemptions = 0;
};

// handover_after: after that many steps the request is released (ReleaseAll, as when its worker group is
// lost) and adopted by a new scheduler, which re-prefills every beam and continues the search.
EngineRun RunEngine(ModelExecutor& executor, int32_t num_blocks, const std::vector<int32_t>& prompt, const Case& c,
                    int32_t max_tokens, int32_t eos, int handover_after = -1) {
  SchedulerConfig config;
  config.max_num_batched_tokens = 16;
  config.max_model_len = 256;
  auto owner = std::make_unique<Scheduler>(config, num_blocks, kBlockSize);
  ScheduleRequest request;
  request.request_id = 3;
  request.prompt_ids = prompt;
  request.stopping.max_tokens = max_tokens;
  request.stopping.eos_token_id = eos;
  request.num_samples = c.n;
  request.beam = {c.width, c.length_penalty, c.early_stopping};
  const Status added = owner->Add(request);
  EXPECT_TRUE(added.ok()) << added.ToString();
  EngineRun run;
  run.results.resize(c.n);
  std::set<int32_t> finished;
  for (int step = 0; owner->has_unfinished(); ++step) {
    if (step == handover_after) {
      std::vector<ReleasedRequest> released = owner->ReleaseAll();
      EXPECT_EQ(owner->block_manager().Stats().num_used, 0);
      owner = std::make_unique<Scheduler>(config, num_blocks, kBlockSize);
      for (ReleasedRequest& r : released) {
        const Status adopted = owner->Adopt(std::move(r));
        EXPECT_TRUE(adopted.ok()) << adopted.ToString();
      }
    }
    Scheduler& scheduler = *owner;
    const StepPlan plan = scheduler.Schedule();
    EXPECT_FALSE(plan.sequences.empty());
    if (plan.sequences.empty()) break;
    // Blocks in use never exceed the pages the live hypotheses' tables hold together.
    std::set<int32_t> pages;
    int32_t num_live = 0;
    for (int32_t slot = 0; slot < c.width; ++slot) {
      if (const Sequence* seq = scheduler.FindSequence(SequenceIdOf(3, slot)); seq != nullptr) {
        ++num_live;
        pages.insert(seq->block_table.begin(), seq->block_table.end());
      }
    }
    EXPECT_LE(num_live, c.width);
    const int32_t used = scheduler.block_manager().Stats().num_used;
    EXPECT_EQ(used, static_cast<int32_t>(pages.size()));
    run.max_blocks_in_use = std::max(run.max_blocks_in_use, used);
    StatusOr<StepResult> result = executor.Execute(plan);
    EXPECT_TRUE(result.ok()) << result.status().ToString();
    if (!result.ok()) break;
    StatusOr<std::vector<SequenceEvent>> events = scheduler.Postprocess(plan, *result);
    EXPECT_TRUE(events.ok()) << events.status().ToString();
    if (!events.ok()) break;
    for (const SequenceEvent& e : *events) {
      EXPECT_LT(e.usage.beam_score, 0);
      EXPECT_GE(e.sample_index, 0);
      EXPECT_LT(e.sample_index, c.n);
      if (e.sample_index < 0 || e.sample_index >= c.n) continue;
      Result& r = run.results[e.sample_index];
      r.ids.push_back(e.token_id);
      r.score = e.usage.beam_score;
      if (e.is_finished) {
        r.ended = e.finish_reason == FinishReason::kStop;
        finished.insert(e.sample_index);
      }
    }
  }
  EXPECT_EQ(static_cast<int32_t>(finished.size()), c.n);
  run.blocks_in_use_after = owner->block_manager().Stats().num_used;
  run.preemptions = owner->Stats().num_preemptions;
  return run;
}

class BeamSearchEngineTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    RandomLlamaShape shape;
    shape.num_heads = 6;
    shape.num_kv_heads = 3;
    shape.head_dim = 16;
    shape.hidden_size = 48;
    shape.vocab_size = 61;
    shape.seed = 29;
    model_ = new RandomLlama(MakeRandomLlama(shape));
    auto ref = ReferenceLlama::Load(model_->config, model_->weights);
    ASSERT_TRUE(ref.ok()) << ref.status().ToString();
    ref_ = new ReferenceLlama(std::move(*ref));
  }
  static void TearDownTestSuite() {
    delete ref_;
    delete model_;
  }
  // The prompt (6 tokens: its 2nd block is partial, so forks copy on write) and an EOS that the
  // search meets: the reference's choice of rank `rank` after the prompt.
  std::vector<int32_t> Prompt() const { return RandomTokens(6, model_->config.vocab_size, 5); }
  int32_t Eos(int32_t rank = 1) const { return ReferenceTop(*ref_, Prompt(), rank + 1)[rank].second; }

  static RandomLlama* model_;
  static ReferenceLlama* ref_;
};
RandomLlama* BeamSearchEngineTest::model_ = nullptr;
ReferenceLlama* BeamSearchEngineTest::ref_ = nullptr;

void ExpectMatchesReference(const std::vector<Result>& engine, const std::vector<Result>& reference,
                            const std::string& name) {
  ASSERT_EQ(engine.size(), reference.size()) << name;
  for (size_t i = 0; i < engine.size(); ++i) {
    EXPECT_EQ(engine[i].ids, reference[i].ids) << name << " hypothesis " << i;
    EXPECT_EQ(engine[i].ended, reference[i].ended) << name << " hypothesis " << i;
    EXPECT_NEAR(engine[i].score, reference[i].score, 1e-4 * std::max(1.0, std::abs(reference[i].score)))
        << name << " hypothesis " << i;
  }
}

TEST_F(BeamSearchEngineTest, EqualsTheExhaustiveFloat64ReferenceAtWidthsOneToFour) {
  LocalEngine engine = MakeLocalEngine(model_->config, model_->weights, kBlockSize, 128);
  const int32_t max_tokens = 7;
  int num_cases = 0, num_ended = 0;
  for (int32_t width = 1; width <= 4; ++width) {
    for (float penalty : {1.0f, 0.0f, 2.0f, -0.5f}) {
      for (EarlyStopping es : {EarlyStopping::kHeuristic, EarlyStopping::kWhenFull, EarlyStopping::kNever}) {
        for (int32_t eos : {-1, Eos(1), Eos(5)}) {  // rank 5: below the width, or not
          const Case c{width, penalty, es, width};
          const std::string name = Name(c) + " eos " + std::to_string(eos);
          const std::vector<Result> reference = ReferenceBeamSearch(*ref_, Prompt(), c, max_tokens, eos);
          const EngineRun run = RunEngine(*engine.executor, 128, Prompt(), c, max_tokens, eos);
          ExpectMatchesReference(run.results, reference, name);
          EXPECT_EQ(run.blocks_in_use_after, 0) << name;
          // The prompt's 2 blocks shared, then each live hypothesis's own tail (a block and a copy).
          EXPECT_LE(run.max_blocks_in_use, 2 + 2 * width) << name;
          ++num_cases;
          for (const Result& r : reference) num_ended += r.ended;
        }
      }
    }
  }
  EXPECT_EQ(num_cases, 144);
  EXPECT_GT(num_ended, 0);  // the EOS cases do finish hypotheses by EOS
}

TEST_F(BeamSearchEngineTest, WidthOneEqualsGreedy) {
  LocalEngine engine = MakeLocalEngine(model_->config, model_->weights, kBlockSize, 128);
  GenerateOptions greedy;
  greedy.max_tokens = 12;
  greedy.ignore_eos = true;
  auto expected = LocalGenerate(*engine.executor, Prompt(), greedy);
  ASSERT_TRUE(expected.ok()) << expected.status().ToString();
  const EngineRun run = RunEngine(*engine.executor, 128, Prompt(), {1, 1.0f, EarlyStopping::kWhenFull, 1}, 12, -1);
  EXPECT_EQ(run.results[0].ids, expected->token_ids);
}

TEST_F(BeamSearchEngineTest, PreemptedParkedBeamsGiveTheSameHypotheses) {
  LocalEngine engine = MakeLocalEngine(model_->config, model_->weights, kBlockSize, 128);
  const Case c{4, 1.0f, EarlyStopping::kNever, 3};
  const int32_t max_tokens = 10;
  const EngineRun roomy = RunEngine(*engine.executor, 128, Prompt(), c, max_tokens, Eos());
  // 6 pages: one hypothesis (16 positions) fits, four do not.
  const EngineRun tight = RunEngine(*engine.executor, 6, Prompt(), c, max_tokens, Eos());
  EXPECT_GT(tight.preemptions, 0);
  EXPECT_EQ(roomy.preemptions, 0);
  ASSERT_EQ(tight.results.size(), roomy.results.size());
  for (size_t i = 0; i < roomy.results.size(); ++i) EXPECT_TRUE(tight.results[i] == roomy.results[i]) << i;
  EXPECT_EQ(tight.blocks_in_use_after, 0);
  ExpectMatchesReference(roomy.results, ReferenceBeamSearch(*ref_, Prompt(), c, max_tokens, Eos()), Name(c));
}

// A request handed to another scheduler mid-search (its group lost, issue 11's replay) ends with the same
// hypotheses: its beams, their candidates and the search's finished hypotheses move with it.
TEST_F(BeamSearchEngineTest, HandedOverMidSearchGivesTheSameHypotheses) {
  LocalEngine engine = MakeLocalEngine(model_->config, model_->weights, kBlockSize, 128);
  const Case c{3, 1.0f, EarlyStopping::kNever, 3};
  const int32_t max_tokens = 9;
  const EngineRun whole = RunEngine(*engine.executor, 128, Prompt(), c, max_tokens, Eos());
  for (int handover : {1, 2, 5}) {
    const EngineRun moved = RunEngine(*engine.executor, 128, Prompt(), c, max_tokens, Eos(), handover);
    ASSERT_EQ(moved.results.size(), whole.results.size());
    for (size_t i = 0; i < whole.results.size(); ++i) {
      EXPECT_TRUE(moved.results[i] == whole.results[i]) << "handover after step " << handover << ", hypothesis " << i;
    }
    EXPECT_EQ(moved.blocks_in_use_after, 0);
  }
}

TEST_F(BeamSearchEngineTest, Tp2EqualsTp1) {
  const Case c{3, 1.0f, EarlyStopping::kHeuristic, 3};
  const int32_t max_tokens = 12;
  LocalEngine engine = MakeLocalEngine(model_->config, model_->weights, kBlockSize, 128);
  const EngineRun tp1 = RunEngine(*engine.executor, 128, Prompt(), c, max_tokens, Eos());
  std::vector<EngineRun> ranks(2);
  ThreadGroup group(2);
  group.Run([&](Communicator& comm) {
    std::unique_ptr<ModelExecutor> executor = MakeRankExecutor(model_->config, model_->weights, comm, 128);
    ranks[comm.rank()] = RunEngine(*executor, 128, Prompt(), c, max_tokens, Eos());
  });
  for (const EngineRun& rank : ranks) {
    ASSERT_EQ(rank.results.size(), tp1.results.size());
    for (size_t i = 0; i < tp1.results.size(); ++i) EXPECT_TRUE(rank.results[i] == tp1.results[i]) << i;
  }
}

}  // namespace
}  // namespace tpserve::testing
