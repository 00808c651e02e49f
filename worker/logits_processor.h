// ProcessLogits: steps 1-4 of sampler.h (logit bias, repetition / frequency / presence penalties,
// temperature) applied to one rank's slice of one row's logits. Only the tokens of the slice are
// touched, so every rank processes its own slice with no communication.
#pragma once

#include <cstdint>
#include <vector>

#include "comm/step_plan.h"

namespace tpserve {

// raw: [V_shard] logits of tokens [vocab_begin, vocab_begin + vocab_shard); out: [V_shard].
// Temperature is applied only when !params.is_greedy(). Out-of-range bias/penalty ids are ignored
// here (ValidateSamplingParams rejects them first). raw and out may be the same buffer.
void ProcessLogits(const float* raw, int64_t vocab_begin, int64_t vocab_shard, const SamplingParams& params,
                   const std::vector<int32_t>& penalty_tokens, float* out);

// True when ProcessLogits would return raw unchanged (greedy, no bias, no penalties).
bool ProcessLogitsIsIdentity(const SamplingParams& params);

}  // namespace tpserve
