// Checks a generate request against the protocol's ranges and the served model, before anything
// is tokenized or queued. Every failure is INVALID_ARGUMENT (→ invalid_request on the wire) or
// OUT_OF_RANGE (→ prompt_too_long) with a message naming the field and the allowed range.
#pragma once

#include <cstdint>
#include <vector>

#include "comm/client_codec.h"
#include "common/status.h"

namespace tpserve {

struct ModelLimits {
  int32_t vocab_size = 0;      // V: token ids must be < V
  int32_t context_length = 0;  // longest prompt + output the model serves
};

inline constexpr float kMaxTemperature = 100.0f;
inline constexpr uint32_t kMaxLogprobs = 20;
inline constexpr uint32_t kMaxSamples = 16;

// Sampling ranges, max_tokens >= 1, n in [1, kMaxSamples], num_logprobs <= kMaxLogprobs, stop
// ids and logit-bias ids in [0, V), a non-empty prompt, prompt token ids in [0, V), chat roles,
// speculative num_tokens <= kMaxSpeculativeTokens.
Status ValidateGenerateRequest(const proto::GenerateRequest& request, const ModelLimits& limits);

// OUT_OF_RANGE when the tokenized prompt leaves no room for one output token.
Status ValidatePromptLength(const std::vector<int32_t>& prompt_ids, const ModelLimits& limits);

}  // namespace tpserve
