// Speculative verification in the worker (SequencePlan::num_draft_tokens): one step that computes a
// sequence's last token plus k proposals and samples after each returns, row by row, bitwise the
// token, logprob and logits that plain decoding produces there one step at a time, for greedy and
// seeded sampling with penalties, batched beside another sequence's prefill, at TP 1 and TP 2
// (ranks as threads; tokens and logits equal across the two). Rows after a wrong proposal are still returned (the coordinator drops them).
#include <gtest/gtest.h>

#include "tests/testing/thread_communicator.h"
#include "tests/worker/engine_test_util.h"

namespace tpserve::testing {
namespace {

constexpr int kBlockSize = 4;
constexpr int kPrompt = 9;
constexpr int kDecodes = 10;

RandomLlama Model() { return MakeQ8Llama(/*seed=*/9); }

SequencePlan Step(uint64_t id, int32_t cached, std::vector<int32_t> tokens, const SamplingParams& sampling,
                  uint32_t sample_index, std::vector<int32_t> history) {
  SequencePlan p = SeqStep(id, cached, std::move(tokens), Iota(0, 8));
  p.sampling = sampling;
  p.sample_index = sample_index;
  if (sampling.has_penalties()) p.penalty_tokens = std::move(history);
  return p;
}

struct Rows {
  std::vector<SequenceResult> plain;     // [1 + kDecodes] tokens of prefill + plain decodes
  std::vector<SequenceResult> verified;  // [1 + kDecodes] rows of one verify step (all proposals right)
  std::vector<SequenceResult> wrong;     // [1 + kDecodes] rows of a verify step with proposal 4 wrong
};

// Plain decoding, then the same continuation verified in one step on a fresh cache, with a
// neighbour's prefill in the step; then once more with a wrong fourth proposal.
Rows RunPlainAndVerified(ModelExecutor& executor, const ModelConfig& config, const SamplingParams& sampling) {
  const std::vector<int32_t> prompt = RandomTokens(kPrompt, config.vocab_size, 3);
  Rows rows;
  std::vector<int32_t> history = prompt;
  rows.plain.push_back(RunStep(executor, {Step(1, 0, prompt, sampling, 0, history)}).sequences.at(0));
  for (int i = 0; i < kDecodes; ++i) {
    const int32_t last = rows.plain.back().token_id;
    history.push_back(last);
    rows.plain.push_back(
        RunStep(executor, {Step(1, kPrompt + i, {last}, sampling, static_cast<uint32_t>(i + 1), history)}).sequences.at(0));
  }
  std::vector<int32_t> continuation;  // t0 .. t_{kDecodes - 1}: the last token and the proposals
  for (int i = 0; i < kDecodes; ++i) continuation.push_back(rows.plain[i].token_id);

  for (bool wrong : {false, true}) {
    const uint64_t id = wrong ? 3 : 2;
    std::vector<int32_t> tokens = continuation;
    if (wrong) tokens[4] = (tokens[4] + 1) % config.vocab_size;
    const SequencePlan first = Step(id, 0, prompt, sampling, 0, prompt);
    EXPECT_EQ(RunStep(executor, {first}).sequences.at(0).token_id, rows.plain[0].token_id);
    std::vector<int32_t> seen = prompt;
    seen.push_back(tokens[0]);
    SequencePlan verify = Step(id, kPrompt, tokens, sampling, 1, seen);
    verify.num_draft_tokens = kDecodes - 1;
    SequencePlan neighbour = SeqStep(9, 0, RandomTokens(7, config.vocab_size, 8), Iota(20, 2));
    neighbour.sampling = sampling;
    StepResult step = RunStep(executor, {neighbour, verify});
    EXPECT_EQ(step.sequences.size(), 1u + kDecodes);
    std::vector<SequenceResult>& out = wrong ? rows.wrong : rows.verified;
    out.push_back(rows.plain[0]);
    out.insert(out.end(), step.sequences.begin() + 1, step.sequences.end());
  }
  return rows;
}

void ExpectSameRow(const SequenceResult& got, const SequenceResult& want, const std::string& where) {
  EXPECT_EQ(got.token_id, want.token_id) << where;
  EXPECT_EQ(got.logprob, want.logprob) << where;
  EXPECT_EQ(got.logits, want.logits) << where;
  ASSERT_EQ(got.top_logprobs.size(), want.top_logprobs.size()) << where;
  for (size_t i = 0; i < got.top_logprobs.size(); ++i) {
    EXPECT_EQ(got.top_logprobs[i].token_id, want.top_logprobs[i].token_id) << where;
    EXPECT_EQ(got.top_logprobs[i].logprob, want.top_logprobs[i].logprob) << where;
  }
}

void ExpectVerifiedEqualsPlain(const Rows& rows) {
  ASSERT_EQ(rows.verified.size(), rows.plain.size());
  for (size_t i = 1; i < rows.plain.size(); ++i) {
    ExpectSameRow(rows.verified[i], rows.plain[i], "verified row " + std::to_string(i));
  }
  // With proposal 4 wrong, rows 1..4 (up to the row that samples after it) are plain's; row 5 on
  // see a different context, so the coordinator never keeps them.
  for (size_t i = 1; i <= 4; ++i) ExpectSameRow(rows.wrong[i], rows.plain[i], "row " + std::to_string(i) + " before the wrong one");
  bool any_differs = false;
  for (size_t i = 6; i < rows.plain.size(); ++i) any_differs |= rows.wrong[i].logits != rows.plain[i].logits;
  EXPECT_TRUE(any_differs) << "rows after a wrong proposal should see it";
}

TEST(SpeculativeVerifyTest, RowsEqualPlainDecodingAtTp1) {
  const RandomLlama model = Model();
  for (const SamplingParams& sampling : {SeededSamplingWithPenalties(), GreedyWithPenalty()}) {
    LocalEngine engine = MakeLocalEngine(model.config, model.weights, kBlockSize, 32, 2);
    const Rows rows = RunPlainAndVerified(*engine.executor, model.config, sampling);
    ExpectVerifiedEqualsPlain(rows);
  }
}

TEST(SpeculativeVerifyTest, RowsEqualPlainDecodingAtTp2AndTp1) {
  const RandomLlama model = Model();
  LocalEngine single = MakeLocalEngine(model.config, model.weights, kBlockSize, 32, 1);
  const Rows tp1 = RunPlainAndVerified(*single.executor, model.config, SeededSamplingWithPenalties());
  std::vector<Rows> ranks(2);
  ThreadGroup group(2, std::chrono::seconds(120));
  group.Run([&](Communicator& comm) {
    auto executor = MakeRankExecutor(model.config, model.weights, comm, 32);
    ranks[comm.rank()] = RunPlainAndVerified(*executor, model.config, SeededSamplingWithPenalties());
  });
  for (const Rows& rows : ranks) {
    ExpectVerifiedEqualsPlain(rows);
    // Tokens and logits are TP-invariant; a logprob's log-sum-exp adds per-rank sums (sampler.h).
    for (size_t i = 0; i < tp1.plain.size(); ++i) {
      EXPECT_EQ(rows.verified[i].token_id, tp1.plain[i].token_id) << "TP 2 vs TP 1 row " << i;
      EXPECT_EQ(rows.verified[i].logits, tp1.plain[i].logits) << "TP 2 vs TP 1 row " << i;
      EXPECT_NEAR(rows.verified[i].logprob, tp1.plain[i].logprob, 1e-5) << "TP 2 vs TP 1 row " << i;
    }
  }
}

TEST(SpeculativeVerifyTest, RefusesDraftsWithoutASampledToken) {
  const RandomLlama model = Model();
  LocalEngine engine = MakeLocalEngine(model.config, model.weights, kBlockSize, 32, 1);
  SequencePlan p = SeqStep(1, 0, {1, 2, 3}, Iota(0, 1), /*needs_token=*/false);
  p.num_draft_tokens = 1;
  StepPlan plan;
  plan.sequences = {p};
  EXPECT_EQ(engine.executor->Execute(plan).status().code(), StatusCode::kInvalidArgument);
  plan.sequences[0].needs_token = true;
  plan.sequences[0].num_draft_tokens = 3;  // every token a draft: nothing to sample the first after
  EXPECT_EQ(engine.executor->Execute(plan).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tpserve::testing
