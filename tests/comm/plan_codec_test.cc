#include "comm/plan_codec.h"

#include <cmath>
#include <limits>
#include <random>

#include <gtest/gtest.h>

namespace tpserve {
namespace {

// A plan with every field away from its default, drawn from a seeded generator.
StepPlan RandomPlan(std::mt19937& rng, int num_sequences) {
  std::uniform_int_distribution<int32_t> token(0, 49151);
  std::uniform_int_distribution<int32_t> small(1, 40);
  StepPlan plan;
  plan.step_id = rng();
  plan.return_logits = rng() % 2;
  for (int s = 0; s < num_sequences; ++s) {
    SequencePlan seq;
    seq.seq_id = (uint64_t{rng()} << 32) | static_cast<uint64_t>(s);
    seq.num_cached = small(rng) * 3;
    for (int i = small(rng); i > 0; --i) seq.token_ids.push_back(token(rng));
    for (int i = small(rng); i > 0; --i) seq.block_table.push_back(token(rng) % 512);
    seq.needs_token = rng() % 2;
    seq.sampling.temperature = 0.7f;
    seq.sampling.top_k = 40;
    seq.sampling.top_p = 0.9f;
    seq.sampling.min_p = 0.05f;
    seq.sampling.repetition_penalty = 1.1f;
    seq.sampling.presence_penalty = 0.5f;
    seq.sampling.frequency_penalty = -0.25f;
    seq.sampling.seed = (uint64_t{rng()} << 32) | rng();
    seq.sampling.has_seed = rng() % 2;
    seq.sampling.logit_bias = {{token(rng), 2.5f}, {token(rng), -100.0f}};
    seq.sampling.num_logprobs = 5;
    seq.sample_index = rng();
    for (int i = small(rng); i > 0; --i) seq.penalty_tokens.push_back(token(rng));
    seq.prompt_logprobs = rng() % 2;
    seq.next_prompt_token = rng() % 2 ? token(rng) : -1;
    // Speculation: proposals of the coordinator's own (n-gram), or of the worker's draft model.
    if (seq.needs_token && !seq.prompt_logprobs && s % 3 == 1) {
      seq.num_draft_tokens = static_cast<int32_t>(seq.token_ids.size()) - 1;
    } else if (seq.needs_token && !seq.prompt_logprobs && s % 3 == 2) {
      seq.draft_model = true;
      for (int i = std::min(seq.num_cached, small(rng)); i > 0; --i) seq.draft_catch_up.push_back(token(rng));
      seq.num_proposals = small(rng) % 8 + 1;
    } else if (s % 4 == 3) {
      seq.draft_model = true;  // the draft model reads the chunk, proposing nothing
    }
    plan.sequences.push_back(std::move(seq));
  }
  plan.block_copies = {{3, 7}, {11, 12}};
  return plan;
}

void ExpectSamePlan(const StepPlan& a, const StepPlan& b) {
  EXPECT_EQ(a.step_id, b.step_id);
  EXPECT_EQ(a.return_logits, b.return_logits);
  EXPECT_EQ(a.block_copies, b.block_copies);
  ASSERT_EQ(a.sequences.size(), b.sequences.size());
  for (size_t i = 0; i < a.sequences.size(); ++i) {
    const SequencePlan& x = a.sequences[i];
    const SequencePlan& y = b.sequences[i];
    EXPECT_EQ(x.seq_id, y.seq_id);
    EXPECT_EQ(x.num_cached, y.num_cached);
    EXPECT_EQ(x.token_ids, y.token_ids);
    EXPECT_EQ(x.block_table, y.block_table);
    EXPECT_EQ(x.needs_token, y.needs_token);
    EXPECT_EQ(x.sample_index, y.sample_index);
    EXPECT_EQ(x.penalty_tokens, y.penalty_tokens);
    EXPECT_EQ(x.sampling.temperature, y.sampling.temperature);
    EXPECT_EQ(x.sampling.top_k, y.sampling.top_k);
    EXPECT_EQ(x.sampling.top_p, y.sampling.top_p);
    EXPECT_EQ(x.sampling.min_p, y.sampling.min_p);
    EXPECT_EQ(x.sampling.repetition_penalty, y.sampling.repetition_penalty);
    EXPECT_EQ(x.sampling.presence_penalty, y.sampling.presence_penalty);
    EXPECT_EQ(x.sampling.frequency_penalty, y.sampling.frequency_penalty);
    EXPECT_EQ(x.sampling.seed, y.sampling.seed);
    EXPECT_EQ(x.sampling.has_seed, y.sampling.has_seed);
    EXPECT_EQ(x.sampling.logit_bias, y.sampling.logit_bias);
    EXPECT_EQ(x.sampling.num_logprobs, y.sampling.num_logprobs);
    EXPECT_EQ(x.prompt_logprobs, y.prompt_logprobs);
    EXPECT_EQ(x.next_prompt_token, y.next_prompt_token);
    EXPECT_EQ(x.num_draft_tokens, y.num_draft_tokens);
    EXPECT_EQ(x.draft_model, y.draft_model);
    EXPECT_EQ(x.draft_catch_up, y.draft_catch_up);
    EXPECT_EQ(x.num_proposals, y.num_proposals);
  }
}

TEST(PlanCodecTest, StepPlanRoundTrip) {
  std::mt19937 rng(17);
  for (int num_sequences : {0, 1, 7, 64}) {
    StepPlan plan = RandomPlan(rng, num_sequences);
    std::string bytes = EncodeStepPlan(plan);
    StatusOr<StepPlan> decoded = DecodeStepPlan(bytes);
    ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
    ExpectSamePlan(plan, *decoded);
  }
}

TEST(PlanCodecTest, DefaultSamplingSurvivesRoundTrip) {
  // The schema's defaults (topP 1, repetitionPenalty 1) must agree with SamplingParams' defaults.
  StepPlan plan;
  plan.sequences.resize(1);
  plan.sequences[0].token_ids = {1};
  StatusOr<StepPlan> decoded = DecodeStepPlan(EncodeStepPlan(plan));
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  const SamplingParams& s = decoded->sequences[0].sampling;
  EXPECT_TRUE(s.is_greedy());
  EXPECT_FALSE(s.has_penalties());
  EXPECT_EQ(s.top_p, 1.0f);
  EXPECT_EQ(s.repetition_penalty, 1.0f);
}

TEST(PlanCodecTest, StepResultRoundTrip) {
  StepResult result;
  result.step_id = 99;
  result.compute_ms = 12.5;
  result.allreduce_ms = 1.25;
  for (int i = 0; i < 3; ++i) {
    SequenceResult seq;
    seq.seq_id = 1000 + i;
    seq.token_id = 42 * i;
    seq.logprob = -0.5f * i;
    seq.top_logprobs = {{7, -0.1f}, {9, -2.0f}};
    seq.logits = {1.0f, -2.0f, 3.5f, -std::numeric_limits<float>::infinity()};
    result.sequences.push_back(seq);
  }
  for (int i = 0; i < 2; ++i) {
    PromptLogprobsResult prompt;
    prompt.seq_id = 2000 + i;
    prompt.positions = {{11, -3.25f, {{4, -0.5f}, {11, -3.25f}}}, {12, -std::numeric_limits<float>::infinity(), {}}};
    result.prompt_logprobs.push_back(prompt);
  }
  result.proposals = {{1000, {5, 6, 7}}, {1002, {}}};
  StatusOr<StepResult> decoded = DecodeStepResult(EncodeStepResult(result));
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  EXPECT_EQ(decoded->step_id, 99u);
  ASSERT_EQ(decoded->proposals.size(), 2u);
  EXPECT_EQ(decoded->proposals[0].seq_id, 1000u);
  EXPECT_EQ(decoded->proposals[0].token_ids, (std::vector<int32_t>{5, 6, 7}));
  EXPECT_EQ(decoded->proposals[1].seq_id, 1002u);
  EXPECT_TRUE(decoded->proposals[1].token_ids.empty());
  EXPECT_EQ(decoded->compute_ms, 12.5);
  EXPECT_EQ(decoded->allreduce_ms, 1.25);
  ASSERT_EQ(decoded->sequences.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    const SequenceResult& seq = decoded->sequences[i];
    EXPECT_EQ(seq.seq_id, 1000u + i);
    EXPECT_EQ(seq.token_id, 42 * i);
    EXPECT_EQ(seq.logprob, -0.5f * i);
    ASSERT_EQ(seq.top_logprobs.size(), 2u);
    EXPECT_EQ(seq.top_logprobs[1].token_id, 9);
    EXPECT_EQ(seq.top_logprobs[1].logprob, -2.0f);
    EXPECT_EQ(seq.logits, result.sequences[i].logits);
  }
  ASSERT_EQ(decoded->prompt_logprobs.size(), 2u);
  for (int i = 0; i < 2; ++i) {
    const PromptLogprobsResult& prompt = decoded->prompt_logprobs[i];
    EXPECT_EQ(prompt.seq_id, 2000u + i);
    ASSERT_EQ(prompt.positions.size(), 2u);
    EXPECT_EQ(prompt.positions[0].token_id, 11);
    EXPECT_EQ(prompt.positions[0].logprob, -3.25f);
    ASSERT_EQ(prompt.positions[0].top_logprobs.size(), 2u);
    EXPECT_EQ(prompt.positions[0].top_logprobs[0].token_id, 4);
    EXPECT_EQ(prompt.positions[0].top_logprobs[0].logprob, -0.5f);
    EXPECT_EQ(prompt.positions[1].logprob, -std::numeric_limits<float>::infinity());
    EXPECT_TRUE(prompt.positions[1].top_logprobs.empty());
  }
  StepResult bad = result;
  bad.prompt_logprobs[1].positions[0].logprob = NAN;
  EXPECT_EQ(DecodeStepResult(EncodeStepResult(bad)).status().code(), StatusCode::kInvalidArgument);
  bad = result;
  bad.prompt_logprobs[0].positions[1].token_id = -1;
  EXPECT_EQ(DecodeStepResult(EncodeStepResult(bad)).status().code(), StatusCode::kInvalidArgument);
  bad = result;
  bad.proposals[0].token_ids[1] = -4;
  EXPECT_EQ(DecodeStepResult(EncodeStepResult(bad)).status().code(), StatusCode::kInvalidArgument);
  bad = result;
  bad.proposals[1].token_ids.assign(kMaxProposalsPerSequence + 1, 3);
  EXPECT_EQ(DecodeStepResult(EncodeStepResult(bad)).status().code(), StatusCode::kInvalidArgument);
}

TEST(PlanCodecTest, EmptyAndUnalignedBytesAreDataLoss) {
  EXPECT_EQ(DecodeStepPlan("").status().code(), StatusCode::kDataLoss);
  EXPECT_EQ(DecodeStepPlan("abc").status().code(), StatusCode::kDataLoss);
  std::string bytes = EncodeStepPlan(RandomPlan(*std::make_unique<std::mt19937>(3), 2));
  EXPECT_EQ(DecodeStepPlan(bytes + "x").status().code(), StatusCode::kDataLoss);
  EXPECT_EQ(DecodeStepPlan(bytes + std::string(8, '\0')).status().code(), StatusCode::kDataLoss);
}

TEST(PlanCodecTest, EveryTruncationIsAnErrorNotACrash) {
  std::mt19937 rng(5);
  std::string bytes = EncodeStepPlan(RandomPlan(rng, 3));
  for (size_t size = 0; size < bytes.size(); size += 8) {
    StatusOr<StepPlan> decoded = DecodeStepPlan(std::string_view(bytes).substr(0, size));
    EXPECT_FALSE(decoded.ok()) << "truncated to " << size << " of " << bytes.size() << " bytes decoded";
  }
}

TEST(PlanCodecTest, RandomGarbageAndBitFlipsNeverCrash) {
  std::mt19937 rng(11);
  std::string good = EncodeStepPlan(RandomPlan(rng, 4));
  int num_errors = 0;
  for (int trial = 0; trial < 2000; ++trial) {
    std::string bytes = good;
    if (trial % 2 == 0) {
      // Flip a few random bits of a valid message: any outcome but a crash is acceptable, and
      // whatever decodes must pass validation.
      for (int k = 0; k < 1 + trial % 4; ++k) bytes[rng() % bytes.size()] ^= static_cast<char>(1 << (rng() % 8));
    } else {
      bytes.resize(8 * (1 + rng() % 64));
      for (char& c : bytes) c = static_cast<char>(rng());
    }
    StatusOr<StepPlan> decoded = DecodeStepPlan(bytes);
    if (decoded.ok()) {
      EXPECT_TRUE(ValidateStepPlan(*decoded).ok());
    } else {
      ++num_errors;
      EXPECT_TRUE(decoded.status().code() == StatusCode::kDataLoss ||
                  decoded.status().code() == StatusCode::kInvalidArgument)
          << decoded.status().ToString();
    }
  }
  EXPECT_GT(num_errors, 500);  // garbage is rejected, not silently accepted
}

TEST(PlanCodecTest, TraversalAndSizeLimitsAreEnforced) {
  // The traversal budget bounds decoding work (what stops pointer-amplified messages): a plan
  // that needs more words than the budget fails with DATA_LOSS instead of being read.
  std::mt19937 rng(2);
  std::string bytes = EncodeStepPlan(RandomPlan(rng, 16));
  DecodeLimits limits;
  limits.traversal_factor = 0;  // floor of 1024 words
  std::string big = EncodeStepPlan(RandomPlan(rng, 2000));
  EXPECT_TRUE(DecodeStepPlan(bytes, limits).ok());
  EXPECT_EQ(DecodeStepPlan(big, limits).status().code(), StatusCode::kDataLoss);
  limits = DecodeLimits();
  limits.max_bytes = 1024;
  EXPECT_EQ(DecodeStepPlan(big, limits).status().code(), StatusCode::kInvalidArgument);
}

TEST(PlanCodecTest, InvalidFieldsAreInvalidArgument) {
  std::mt19937 rng(9);
  const StepPlan good = RandomPlan(rng, 2);
  ASSERT_TRUE(ValidateStepPlan(good).ok());
  auto expect_invalid = [&](auto mutate, const char* what) {
    StepPlan plan = good;
    mutate(plan);
    StatusOr<StepPlan> decoded = DecodeStepPlan(EncodeStepPlan(plan));
    EXPECT_EQ(decoded.status().code(), StatusCode::kInvalidArgument) << what;
  };
  expect_invalid([](StepPlan& p) { p.sequences[0].token_ids[0] = -1; }, "negative token");
  expect_invalid([](StepPlan& p) { p.sequences[1].block_table.push_back(-3); }, "block id below -1");
  {  // -1 (a released sliding-window page) passes the codec; the executor judges it
    StepPlan plan = good;
    plan.sequences[1].block_table.push_back(-1);
    EXPECT_TRUE(DecodeStepPlan(EncodeStepPlan(plan)).ok());
  }
  expect_invalid([](StepPlan& p) { p.sequences[0].num_cached = -1; }, "negative num_cached");
  expect_invalid([](StepPlan& p) { p.sequences[0].token_ids.clear(); }, "no tokens");
  expect_invalid([](StepPlan& p) { p.sequences[1].seq_id = p.sequences[0].seq_id; }, "duplicate seq");
  expect_invalid([](StepPlan& p) { p.sequences[0].sampling.temperature = NAN; }, "NaN temperature");
  expect_invalid([](StepPlan& p) { p.sequences[0].sampling.top_p = 0; }, "top_p 0");
  expect_invalid([](StepPlan& p) { p.sequences[0].sampling.top_k = -2; }, "top_k < 0");
  expect_invalid([](StepPlan& p) { p.sequences[0].sampling.num_logprobs = 100000; }, "num_logprobs");
  expect_invalid([](StepPlan& p) { p.sequences[0].sampling.repetition_penalty = 0; }, "rep penalty 0");
  expect_invalid([](StepPlan& p) { p.block_copies.push_back({-1, 2}); }, "block copy");
  expect_invalid([](StepPlan& p) { p.sequences[1].next_prompt_token = -2; }, "next prompt token < -1");
  expect_invalid([](StepPlan& p) { p.sequences[0].num_cached = std::numeric_limits<int32_t>::max(); },
                 "position overflow");
  // Draft-model fields (sequence 0 of RandomPlan is plain, 1 carries n-gram drafts when it samples).
  auto with_draft = [](StepPlan& p) -> SequencePlan& {
    SequencePlan& seq = p.sequences[0];
    seq.needs_token = true;
    seq.prompt_logprobs = false;
    seq.num_draft_tokens = 0;
    seq.draft_model = true;
    seq.num_proposals = 2;
    return seq;
  };
  {
    StepPlan plan = good;
    with_draft(plan).draft_catch_up.assign(plan.sequences[0].num_cached, 1);
    EXPECT_TRUE(DecodeStepPlan(EncodeStepPlan(plan)).ok()) << "catch-up from position 0";
  }
  expect_invalid([&](StepPlan& p) { with_draft(p).draft_catch_up.assign(p.sequences[0].num_cached + 1, 1); },
                 "catch-up before position 0");
  expect_invalid([&](StepPlan& p) { with_draft(p).draft_catch_up = {-1}; }, "negative catch-up id");
  expect_invalid([&](StepPlan& p) { with_draft(p).draft_model = false; }, "proposals without the draft model");
  expect_invalid([&](StepPlan& p) { with_draft(p).needs_token = false; }, "proposals without a sampled token");
  expect_invalid([&](StepPlan& p) { with_draft(p).prompt_logprobs = true; }, "proposals with prompt logprobs");
  expect_invalid([&](StepPlan& p) { with_draft(p).num_proposals = kMaxProposalsPerSequence + 1; }, "too many");
  expect_invalid([&](StepPlan& p) { with_draft(p).num_proposals = -1; }, "negative proposals");
  expect_invalid([&](StepPlan& p) {
    SequencePlan& seq = with_draft(p);
    seq.token_ids = {1, 2};
    seq.num_draft_tokens = 1;
  }, "proposals besides draft tokens");
}

}  // namespace
}  // namespace tpserve
