#include "worker/logits_processor.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>

namespace tpserve {

bool ProcessLogitsIsIdentity(const SamplingParams& params) {
  return params.is_greedy() && params.logit_bias.empty() && !params.has_penalties();
}

void ProcessLogits(const float* raw, int64_t vocab_begin, int64_t vocab_shard, const SamplingParams& params,
                   const std::vector<int32_t>& penalty_tokens, float* out) {
  if (out != raw) std::memcpy(out, raw, sizeof(float) * static_cast<size_t>(vocab_shard));
  const int64_t vocab_end = vocab_begin + vocab_shard;
  const auto is_local = [&](int64_t id) { return id >= vocab_begin && id < vocab_end; };

  for (const auto& [id, bias] : params.logit_bias) {
    if (is_local(id)) out[id - vocab_begin] += bias;
  }

  if (params.has_penalties()) {
    // Counts of this slice's tokens: sort the local ids, then each run is one token.
    std::vector<int32_t> local;
    for (int32_t id : penalty_tokens) {
      if (is_local(id)) local.push_back(id);
    }
    std::sort(local.begin(), local.end());
    for (size_t begin = 0; begin < local.size();) {
      size_t end = begin;
      while (end < local.size() && local[end] == local[begin]) ++end;
      const float count = static_cast<float>(end - begin);
      float& x = out[local[begin] - vocab_begin];
      x = x > 0.0f ? x / params.repetition_penalty : x * params.repetition_penalty;
      x -= params.frequency_penalty * count;
      x -= params.presence_penalty;
      begin = end;
    }
  }

  // Temperature (greedy rows: none), then +inf (an overflow; raw +inf is an error caught by the sampler) -> FLT_MAX.
  const float temperature = params.is_greedy() ? 1.0f : params.temperature;
  for (int64_t i = 0; i < vocab_shard; ++i) {
    const float x = out[i] / temperature;  // x / 1 == x exactly
    out[i] = x == INFINITY ? FLT_MAX : x;
  }
}

}  // namespace tpserve
