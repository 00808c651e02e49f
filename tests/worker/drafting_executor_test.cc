// DraftingExecutor (speculation by a draft model in the worker): the proposals are exactly what the
// draft model alone produces by plain decoding from the same context (greedy with a penalty, and
// seeded sampling), whether it read the prompt during prefill or catches up on it later; the target's
// rows are bitwise those of plain decoding; a draft identical to the target is always right, seeded
// sampling included (its draws are coupled to the target's); TP 2 gives TP 1's proposals and tokens;
// and the plans each model sees are what drafting_executor.h says.
#include "worker/drafting_executor.h"

#include <gtest/gtest.h>

#include <memory>

#include "tests/testing/thread_communicator.h"
#include "tests/worker/engine_test_util.h"

namespace tpserve::testing {
namespace {

constexpr int kBlockSize = 4;
constexpr int kPrompt = 9;
constexpr int kProposals = 5;
constexpr int64_t kPages = 32;

RandomLlama Target() { return MakeQ8Llama(/*seed=*/9); }

// Another model of the same vocabulary: one layer, fewer heads.
RandomLlama Draft() {
  RandomLlamaShape shape;
  shape.num_layers = 1;
  shape.num_heads = 4;
  shape.num_kv_heads = 2;
  shape.head_dim = 16;
  shape.hidden_size = 64;
  shape.vocab_size = 211;
  shape.seed = 21;
  return MakeRandomLlama(shape);
}

std::unique_ptr<StepExecutor> Borrow(ModelExecutor* executor) {
  return std::make_unique<FunctionStepExecutor>([executor](const StepPlan& plan) { return executor->Execute(plan); });
}

std::unique_ptr<DraftingExecutor> Drafting(ModelExecutor* target, ModelExecutor* draft) {
  auto drafting = DraftingExecutor::Create(Borrow(target), KvGroups{}, target->config().vocab_size, Borrow(draft),
                                           draft->config().vocab_size);
  CHECK(drafting.ok()) << drafting.status().ToString();
  return std::move(drafting).value();
}

SequencePlan Step(int32_t cached, std::vector<int32_t> tokens, const SamplingParams& sampling, uint32_t sample_index,
                  const std::vector<int32_t>& history) {
  SequencePlan p = SeqStep(1, cached, std::move(tokens), Iota(0, 8));
  p.sampling = sampling;
  p.sample_index = sample_index;
  if (sampling.has_penalties()) p.penalty_tokens = history;
  return p;
}

StepResult RunOne(StepExecutor& executor, SequencePlan seq) {
  StepPlan plan;
  plan.sequences = {std::move(seq)};
  plan.return_logits = true;
  auto result = executor.Execute(plan);
  CHECK(result.ok()) << result.status().ToString();
  return std::move(result).value();
}

// Plain decoding of `executor`'s model: the first token after the prompt, then `n` more, each drawn
// as the plan of decode step i would draw it.
std::vector<SequenceResult> PlainDecode(ModelExecutor& executor, const std::vector<int32_t>& prompt,
                                        const SamplingParams& sampling, int n) {
  FunctionStepExecutor plain([&](const StepPlan& plan) { return executor.Execute(plan); });
  std::vector<int32_t> history = prompt;
  std::vector<SequenceResult> rows = {RunOne(plain, Step(0, prompt, sampling, 0, history)).sequences.at(0)};
  for (int i = 0; i < n; ++i) {
    history.push_back(rows.back().token_id);
    rows.push_back(
        RunOne(plain, Step(kPrompt + i, {rows.back().token_id}, sampling, static_cast<uint32_t>(i + 1), history))
            .sequences.at(0));
  }
  return rows;
}

struct Drafted {
  int32_t first = -1;                // the token the prefill step sampled
  std::vector<int32_t> proposals;    // [kProposals] of the decode step after it
  std::vector<SequenceResult> rows;  // [1 + kProposals] that step's verified rows
};

// A prefill (the draft reading it, or not) and one decode step proposing kProposals tokens.
Drafted PrefillAndPropose(StepExecutor& drafting, const std::vector<int32_t>& prompt, const SamplingParams& sampling,
                          bool draft_reads_prefill) {
  SequencePlan prefill = Step(0, prompt, sampling, 0, prompt);
  prefill.draft_model = draft_reads_prefill;
  Drafted out;
  out.first = RunOne(drafting, prefill).sequences.at(0).token_id;
  std::vector<int32_t> history = prompt;
  history.push_back(out.first);
  SequencePlan decode = Step(kPrompt, {out.first}, sampling, 1, history);
  decode.draft_model = true;
  if (!draft_reads_prefill) decode.draft_catch_up = prompt;
  decode.num_proposals = kProposals;
  StepResult step = RunOne(drafting, decode);
  EXPECT_EQ(step.proposals.size(), 1u);
  if (step.proposals.size() == 1) out.proposals = step.proposals[0].token_ids;
  out.rows = step.sequences;
  return out;
}

void ExpectSameRow(const SequenceResult& got, const SequenceResult& want, const std::string& where) {
  EXPECT_EQ(got.token_id, want.token_id) << where;
  EXPECT_EQ(got.logprob, want.logprob) << where;
  EXPECT_EQ(got.logits, want.logits) << where;
}

TEST(DraftingExecutorTest, ProposalsAreTheDraftModelsOwnDecodingAndRowsArePlain) {
  const RandomLlama target = Target(), draft = Draft();
  const std::vector<int32_t> prompt = RandomTokens(kPrompt, target.config.vocab_size, 3);
  for (const SamplingParams& sampling : {GreedyWithPenalty(), SeededSamplingWithPenalties()}) {
    SCOPED_TRACE(sampling.is_greedy() ? "greedy" : "sampled");
    LocalEngine t = MakeLocalEngine(target.config, target.weights, kBlockSize, kPages, 2);
    LocalEngine d = MakeLocalEngine(draft.config, draft.weights, kBlockSize, kPages, 2);
    auto drafting = Drafting(t.executor.get(), d.executor.get());
    const Drafted read = PrefillAndPropose(*drafting, prompt, sampling, /*draft_reads_prefill=*/true);
    ASSERT_EQ(read.proposals.size(), static_cast<size_t>(kProposals));

    // The draft model alone, decoding from prompt ++ first as the target's rows would draw.
    LocalEngine alone = MakeLocalEngine(draft.config, draft.weights, kBlockSize, kPages, 1);
    FunctionStepExecutor plain([&](const StepPlan& plan) { return alone.executor->Execute(plan); });
    std::vector<int32_t> history = prompt;
    (void)RunOne(plain, Step(0, prompt, sampling, 0, history));
    int32_t last = read.first;
    for (int j = 0; j < kProposals; ++j) {
      history.push_back(last);
      const SequencePlan next = Step(kPrompt + j, {last}, sampling, static_cast<uint32_t>(j + 1), history);
      last = RunOne(plain, next).sequences.at(0).token_id;
      EXPECT_EQ(read.proposals[j], last) << "proposal " << j;
    }

    // The target's rows: plain decoding's up to (and including) the row after the first wrong proposal.
    LocalEngine fresh = MakeLocalEngine(target.config, target.weights, kBlockSize, kPages, 1);
    const std::vector<SequenceResult> want = PlainDecode(*fresh.executor, prompt, sampling, kProposals);
    EXPECT_EQ(read.first, want[0].token_id);
    ASSERT_EQ(read.rows.size(), 1u + kProposals);
    for (int j = 0; j <= kProposals; ++j) {
      ExpectSameRow(read.rows[j], want[j + 1], "row " + std::to_string(j));
      if (j < kProposals && read.proposals[j] != want[j + 1].token_id) break;
    }

    // The same proposals and rows when the draft did not read the prefill and catches up on it.
    LocalEngine t2 = MakeLocalEngine(target.config, target.weights, kBlockSize, kPages, 2);
    LocalEngine d2 = MakeLocalEngine(draft.config, draft.weights, kBlockSize, kPages, 2);
    auto late = Drafting(t2.executor.get(), d2.executor.get());
    const Drafted caught_up = PrefillAndPropose(*late, prompt, sampling, /*draft_reads_prefill=*/false);
    EXPECT_EQ(caught_up.proposals, read.proposals);
    for (int j = 0; j <= kProposals; ++j) {
      ExpectSameRow(caught_up.rows[j], read.rows[j], "caught-up row " + std::to_string(j));
    }
  }
}

TEST(DraftingExecutorTest, TheTargetAsItsOwnDraftIsAlwaysRightSampledToo) {
  const RandomLlama target = Target();
  const std::vector<int32_t> prompt = RandomTokens(kPrompt, target.config.vocab_size, 4);
  for (const SamplingParams& sampling : {GreedyWithPenalty(), SeededSamplingWithPenalties()}) {
    LocalEngine t = MakeLocalEngine(target.config, target.weights, kBlockSize, kPages, 2);
    LocalEngine d = MakeLocalEngine(target.config, target.weights, kBlockSize, kPages, 2);
    auto drafting = Drafting(t.executor.get(), d.executor.get());
    const Drafted drafted = PrefillAndPropose(*drafting, prompt, sampling, true);
    ASSERT_EQ(drafted.proposals.size(), static_cast<size_t>(kProposals));
    for (int j = 0; j < kProposals; ++j) EXPECT_EQ(drafted.proposals[j], drafted.rows[j].token_id) << "proposal " << j;
  }
}

TEST(DraftingExecutorTest, Tp2GivesTp1sProposalsAndTokens) {
  const RandomLlama target = Target(), draft = Draft();
  const std::vector<int32_t> prompt = RandomTokens(kPrompt, target.config.vocab_size, 5);
  LocalEngine t = MakeLocalEngine(target.config, target.weights, kBlockSize, kPages, 1);
  LocalEngine d = MakeLocalEngine(draft.config, draft.weights, kBlockSize, kPages, 1);
  auto single = Drafting(t.executor.get(), d.executor.get());
  const Drafted tp1 = PrefillAndPropose(*single, prompt, SeededSamplingWithPenalties(), true);
  std::vector<Drafted> ranks(2);
  ThreadGroup group(2, std::chrono::seconds(120));
  group.Run([&](Communicator& comm) {
    auto rank_target = MakeRankExecutor(target.config, target.weights, comm, kPages);
    auto rank_draft = MakeRankExecutor(draft.config, draft.weights, comm, kPages);
    auto drafting = Drafting(rank_target.get(), rank_draft.get());
    ranks[comm.rank()] = PrefillAndPropose(*drafting, prompt, SeededSamplingWithPenalties(), true);
  });
  for (const Drafted& rank : ranks) {
    EXPECT_EQ(rank.first, tp1.first);
    EXPECT_EQ(rank.proposals, tp1.proposals);
    ASSERT_EQ(rank.rows.size(), tp1.rows.size());
    for (size_t j = 0; j < tp1.rows.size(); ++j) {
      EXPECT_EQ(rank.rows[j].token_id, tp1.rows[j].token_id) << "row " << j;
      EXPECT_EQ(rank.rows[j].logits, tp1.rows[j].logits) << "row " << j;
    }
  }
}

// The plans each side sees, with fakes: the draft reads catch-up ++ tokens through the full group's
// pages, the block copies once, then one token per further proposal; the target gets the proposals
// as draft tokens and no draft fields; a prefill the draft only reads makes no proposal.
TEST(DraftingExecutorTest, EachModelSeesThePlansTheContractSays) {
  std::vector<StepPlan> draft_plans, target_plans;
  int32_t next_token = 100;
  auto draft = std::make_unique<FunctionStepExecutor>([&](const StepPlan& plan) -> StatusOr<StepResult> {
    draft_plans.push_back(plan);
    StepResult r;
    for (const SequencePlan& seq : plan.sequences) {
      if (seq.needs_token) r.sequences.push_back({seq.seq_id, next_token++, 0.0f, {}, {}});
    }
    return r;
  });
  auto target = std::make_unique<FunctionStepExecutor>([&](const StepPlan& plan) -> StatusOr<StepResult> {
    target_plans.push_back(plan);
    return StepResult{};
  });
  KvGroups groups;
  groups.sliding = {true, false};
  groups.window = 8;
  auto drafting = DraftingExecutor::Create(std::move(target), groups, 50, std::move(draft), 50);
  ASSERT_TRUE(drafting.ok()) << drafting.status().ToString();

  StepPlan plan;
  plan.block_copies = {{3, 9}};
  SequencePlan decode = SeqStep(1, 6, {7}, {10, 20, 11, 21});  // [block][group]: full pages 20, 21
  decode.draft_model = true;
  decode.draft_catch_up = {4, 5};
  decode.num_proposals = 3;
  decode.sampling.seed = 5;
  decode.sample_index = 2;
  SequencePlan prefill = SeqStep(2, 0, {1, 2, 3}, {12, 22}, /*needs_token=*/false);
  prefill.draft_model = true;
  SequencePlan plain = SeqStep(3, 0, {8}, {13, 23});
  plan.sequences = {decode, prefill, plain};
  auto result = (*drafting)->Execute(plan);
  ASSERT_TRUE(result.ok()) << result.status().ToString();

  ASSERT_EQ(draft_plans.size(), 3u);  // the first step, then two more proposals
  const StepPlan& first = draft_plans[0];
  EXPECT_EQ(first.block_copies, plan.block_copies);
  ASSERT_EQ(first.sequences.size(), 2u);  // the plain sequence is not the draft's
  EXPECT_EQ(first.sequences[0].num_cached, 4);
  EXPECT_EQ(first.sequences[0].token_ids, (std::vector<int32_t>{4, 5, 7}));
  EXPECT_EQ(first.sequences[0].block_table, (std::vector<int32_t>{20, 21}));
  EXPECT_TRUE(first.sequences[0].needs_token);
  EXPECT_EQ(first.sequences[0].sample_index, 2u);
  EXPECT_EQ(first.sequences[0].sampling.seed, 5u);
  EXPECT_EQ(first.sequences[1].token_ids, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(first.sequences[1].block_table, (std::vector<int32_t>{22}));
  EXPECT_FALSE(first.sequences[1].needs_token);
  for (int j = 1; j <= 2; ++j) {
    const StepPlan& after = draft_plans[j];
    EXPECT_TRUE(after.block_copies.empty()) << "copies run once";
    ASSERT_EQ(after.sequences.size(), 1u);
    EXPECT_EQ(after.sequences[0].num_cached, 6 + j);
    EXPECT_EQ(after.sequences[0].token_ids, (std::vector<int32_t>{100 + j - 1}));
    EXPECT_EQ(after.sequences[0].sample_index, static_cast<uint32_t>(2 + j));
  }

  ASSERT_EQ(target_plans.size(), 1u);
  const StepPlan& verify = target_plans[0];
  EXPECT_EQ(verify.block_copies, plan.block_copies);
  ASSERT_EQ(verify.sequences.size(), 3u);
  EXPECT_EQ(verify.sequences[0].token_ids, (std::vector<int32_t>{7, 100, 101, 102}));
  EXPECT_EQ(verify.sequences[0].num_draft_tokens, 3);
  EXPECT_EQ(verify.sequences[0].block_table, decode.block_table);
  for (const SequencePlan& seq : verify.sequences) {
    EXPECT_FALSE(seq.draft_model);
    EXPECT_TRUE(seq.draft_catch_up.empty());
    EXPECT_EQ(seq.num_proposals, 0);
  }
  ASSERT_EQ(result->proposals.size(), 1u);
  EXPECT_EQ(result->proposals[0].seq_id, 1u);
  EXPECT_EQ(result->proposals[0].token_ids, (std::vector<int32_t>{100, 101, 102}));
}

TEST(DraftingExecutorTest, RefusesWhatItCannotServe) {
  auto none = [] { return std::make_unique<FunctionStepExecutor>([](const StepPlan&) { return StepResult{}; }); };
  EXPECT_EQ(DraftingExecutor::Create(none(), KvGroups{}, 50, none(), 51).status().code(), StatusCode::kInvalidArgument);
  KvGroups sliding;
  sliding.sliding = {true};
  sliding.window = 4;
  EXPECT_EQ(DraftingExecutor::Create(none(), sliding, 50, none(), 50).status().code(), StatusCode::kInvalidArgument);
  // An executor with no draft model beside it refuses a plan that asks for one.
  const RandomLlama target = Target();
  LocalEngine t = MakeLocalEngine(target.config, target.weights, kBlockSize, kPages, 1);
  SequencePlan seq = SeqStep(1, 0, {1, 2, 3}, Iota(0, 1));
  seq.draft_model = true;
  StepPlan plan;
  plan.sequences = {seq};
  EXPECT_EQ(t.executor->Execute(plan).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tpserve::testing
