// The fake workers' prompt logprobs (SequencePlan::prompt_logprobs): the "logprob" of the token at
// position p + 1 is a hash of the context read back from the KV slots of positions 0..p and of that
// token, so a chunk boundary off by one, a wrong next_prompt_token or K/V served from the wrong
// blocks changes it; FakePromptLogprobsReference (no paging) is what a request must receive.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "comm/step_plan.h"

namespace tpserve::testing {

inline float FakePromptLogprob(const std::vector<int32_t>& context, int32_t target) {
  uint64_t h = 0x6a09e667f3bcc909ull ^ static_cast<uint32_t>(target);
  for (int32_t t : context) h = (h ^ static_cast<uint32_t>(t)) * 0x100000001b3ull;
  h ^= h >> 29;
  return -static_cast<float>(h % 10000) / 1000.0f - 0.001f;  // in (-10, 0)
}

// The fake top alternatives: token k with logprob -1 - k, as the fakes' sampled tokens report.
inline std::vector<TokenLogprob> FakeTopLogprobs(int32_t num_logprobs) {
  std::vector<TokenLogprob> top;
  for (int32_t k = 0; k < num_logprobs; ++k) top.push_back({k, -1.0f - static_cast<float>(k)});
  return top;
}

// The logprobs of prompt tokens 1.. (token i + 1 given tokens 0..i).
inline std::vector<float> FakePromptLogprobsReference(const std::vector<int32_t>& prompt) {
  std::vector<float> logprobs;
  for (size_t i = 0; i + 1 < prompt.size(); ++i) {
    logprobs.push_back(FakePromptLogprob({prompt.begin(), prompt.begin() + i + 1}, prompt[i + 1]));
  }
  return logprobs;
}

// Scores one chunk after its tokens were written; token_at(pos) reads the KV slot of position pos.
inline PromptLogprobsResult FakeScoreChunk(const SequencePlan& seq, const std::function<int32_t(int32_t)>& token_at) {
  PromptLogprobsResult result;
  result.seq_id = seq.seq_id;
  const int32_t n = static_cast<int32_t>(seq.token_ids.size());
  for (int32_t j = 0; j < seq.num_prompt_logprobs(); ++j) {
    std::vector<int32_t> context;
    for (int32_t pos = 0; pos <= seq.num_cached + j; ++pos) context.push_back(token_at(pos));
    const int32_t target = j + 1 < n ? seq.token_ids[j + 1] : seq.next_prompt_token;
    result.positions.push_back({target, FakePromptLogprob(context, target), FakeTopLogprobs(seq.sampling.num_logprobs)});
  }
  return result;
}

}  // namespace tpserve::testing
