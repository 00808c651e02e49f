#include "tests/testing/prompt_logprobs_drive.h"

#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <random>
#include <string>

namespace tpserve::testing {
namespace {

std::vector<int32_t> Blocks(int32_t first, int32_t n) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), first);
  return v;
}

SequencePlan Seq(uint64_t seq_id, int32_t num_cached, std::vector<int32_t> tokens, std::vector<int32_t> blocks,
                 bool needs_token) {
  SequencePlan seq;
  seq.seq_id = seq_id;
  seq.num_cached = num_cached;
  seq.token_ids = std::move(tokens);
  seq.block_table = std::move(blocks);
  seq.needs_token = needs_token;
  return seq;
}

uint32_t Bits(float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, sizeof(bits));
  return bits;
}

}  // namespace

StatusOr<std::vector<PromptTokenLogprob>> ScoreByPrefill(const StepFunction& execute,
                                                         const std::vector<int32_t>& prompt, int chunk,
                                                         int vocab_size) {
  const int32_t num_prompt = static_cast<int32_t>(prompt.size());
  std::mt19937 rng(99);
  std::vector<int32_t> other(24);
  for (int32_t& t : other) t = static_cast<int32_t>(rng() % static_cast<uint32_t>(vocab_size));
  std::vector<PromptTokenLogprob> scored;
  uint64_t step = 0;
  for (int32_t begin = 0; begin < num_prompt; begin += chunk, ++step) {
    const int32_t n = std::min(chunk, num_prompt - begin);
    StepPlan plan;
    plan.step_id = step + 1;
    // seq 2: 3 tokens of prefill, then a decode per step (blocks 40..45).
    if (step == 0) {
      plan.sequences.push_back(Seq(2, 0, {other.begin(), other.begin() + 3}, Blocks(40, 6), true));
    } else {
      const int32_t pos = 2 + static_cast<int32_t>(step);
      plan.sequences.push_back(Seq(2, pos, {other[pos]}, Blocks(40, 6), true));
    }
    SequencePlan seq = Seq(1, begin, {prompt.begin() + begin, prompt.begin() + begin + n}, Blocks(0, 10),
                           begin + n == num_prompt);
    seq.prompt_logprobs = true;
    seq.next_prompt_token = begin + n < num_prompt ? prompt[begin + n] : -1;
    seq.sampling.num_logprobs = kPromptDriveLogprobs;
    plan.sequences.push_back(seq);
    if (step == 0) {  // seq 3: a short prompt scored whole, listed after seq 1
      SequencePlan third = Seq(3, 0, {other.begin() + 10, other.begin() + 15}, Blocks(50, 2), false);
      third.prompt_logprobs = true;
      third.sampling.num_logprobs = 1;
      plan.sequences.push_back(third);
    }
    ASSIGN_OR_RETURN(StepResult result, execute(plan));
    if (result.prompt_logprobs.size() != (step == 0 ? 2u : 1u) || result.prompt_logprobs[0].seq_id != 1 ||
        static_cast<int32_t>(result.prompt_logprobs[0].positions.size()) != seq.num_prompt_logprobs()) {
      return Internal("step " + std::to_string(step) + ": unexpected prompt logprobs");
    }
    if (step == 0 && (result.prompt_logprobs[1].seq_id != 3 || result.prompt_logprobs[1].positions.size() != 4)) {
      return Internal("the second scored prompt's logprobs are missing");
    }
    const auto& positions = result.prompt_logprobs[0].positions;
    scored.insert(scored.end(), positions.begin(), positions.end());
  }
  return scored;
}

StatusOr<std::vector<SequenceResult>> ForceByDecode(const StepFunction& execute, const std::vector<int32_t>& prompt) {
  std::vector<SequenceResult> forced;
  for (size_t j = 0; j + 1 < prompt.size(); ++j) {
    StepPlan plan;
    plan.step_id = 1000 + j;
    SequencePlan seq = Seq(9, static_cast<int32_t>(j), {prompt[j]}, Blocks(20, 10), true);
    seq.sampling.logit_bias = {{prompt[j + 1], 1e30f}};
    seq.sampling.num_logprobs = kPromptDriveLogprobs;
    seq.sample_index = static_cast<uint32_t>(j);
    plan.sequences.push_back(seq);
    ASSIGN_OR_RETURN(StepResult result, execute(plan));
    if (result.sequences.size() != 1 || !result.prompt_logprobs.empty()) return Internal("unexpected result");
    forced.push_back(result.sequences[0]);
  }
  return forced;
}

void ExpectBitwiseEqual(const std::vector<PromptTokenLogprob>& scored, const std::vector<SequenceResult>& forced,
                        const std::vector<int32_t>& prompt) {
  ASSERT_EQ(scored.size(), prompt.size() - 1);
  ASSERT_EQ(forced.size(), prompt.size() - 1);
  for (size_t i = 0; i < scored.size(); ++i) {
    EXPECT_EQ(forced[i].token_id, prompt[i + 1]) << "position " << i << ": the bias did not force the token";
    EXPECT_EQ(scored[i].token_id, prompt[i + 1]) << "position " << i;
    EXPECT_EQ(Bits(scored[i].logprob), Bits(forced[i].logprob))
        << "position " << i << ": " << scored[i].logprob << " vs " << forced[i].logprob;
    ASSERT_EQ(scored[i].top_logprobs.size(), static_cast<size_t>(kPromptDriveLogprobs));
    ASSERT_EQ(forced[i].top_logprobs.size(), static_cast<size_t>(kPromptDriveLogprobs));
    for (int k = 0; k < kPromptDriveLogprobs; ++k) {
      EXPECT_EQ(scored[i].top_logprobs[k].token_id, forced[i].top_logprobs[k].token_id) << "position " << i;
      EXPECT_EQ(Bits(scored[i].top_logprobs[k].logprob), Bits(forced[i].top_logprobs[k].logprob)) << "position " << i;
    }
  }
}

}  // namespace tpserve::testing
