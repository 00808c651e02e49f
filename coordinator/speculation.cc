#include "coordinator/speculation.h"

#include <algorithm>
#include <cmath>

namespace tpserve {

StatusOr<SpeculativeConfig> ParseSpeculativeConfig(std::string_view text) {
  ASSIGN_OR_RETURN(proto::SpeculativeRequest request, proto::ParseSpeculativeRequest(text));
  return ResolveSpeculative(request, SpeculativeConfig());
}

std::string SpeculativeConfigName(const SpeculativeConfig& config) {
  if (!config.enabled()) return "off";
  return (config.method == SpeculativeMethod::kDraft ? "draft:" : "ngram:") + std::to_string(config.num_tokens);
}

Status ValidateSpeculativeConfig(const SpeculativeConfig& config) {
  if (config.method == SpeculativeMethod::kOff) return OkStatus();
  if (config.num_tokens < 1 || config.num_tokens > kMaxSpeculativeTokens) {
    return InvalidArgument("speculative tokens per step must be in [1, " + std::to_string(kMaxSpeculativeTokens) +
                           "], got " + std::to_string(config.num_tokens));
  }
  if (config.min_ngram < 1 || config.max_ngram < config.min_ngram || config.max_ngram > 16) {
    return InvalidArgument("n-gram lengths must satisfy 1 <= min <= max <= 16, got " +
                           std::to_string(config.min_ngram) + ".." + std::to_string(config.max_ngram));
  }
  return OkStatus();
}

std::vector<int32_t> ProposeNgram(const std::vector<int32_t>& prompt, const std::vector<int32_t>& output, int32_t k,
                                  int32_t min_ngram, int32_t max_ngram) {
  const int64_t num_prompt = static_cast<int64_t>(prompt.size());
  const int64_t size = num_prompt + static_cast<int64_t>(output.size());
  auto at = [&](int64_t i) { return i < num_prompt ? prompt[i] : output[i - num_prompt]; };
  if (k <= 0) return {};
  for (int64_t n = std::min<int64_t>(max_ngram, size - 1); n >= min_ngram; --n) {
    const int64_t suffix = size - n;
    int64_t best = -1;  // the earliest occurrence seen: the one with the most tokens after it
    // Latest start first; a match needs a token after it: i + n <= size - 1.
    for (int64_t i = size - n - 1; i >= 0; --i) {
      int64_t j = 0;
      while (j < n && at(i + j) == at(suffix + j)) ++j;
      if (j < n) continue;
      best = i;
      if (size - (i + n) >= k) break;
    }
    if (best < 0) continue;
    std::vector<int32_t> proposed;
    for (int64_t i = best + n; i < std::min<int64_t>(best + n + k, size); ++i) proposed.push_back(at(i));
    return proposed;
  }
  return {};
}

SpeculativeConfig ResolveSpeculative(const proto::SpeculativeRequest& request, const SpeculativeConfig& server_default) {
  switch (request.method) {
    case proto::SpeculativeChoice::kServerDefault: return server_default;
    case proto::SpeculativeChoice::kOff: return SpeculativeConfig();
    case proto::SpeculativeChoice::kNgram: break;
    case proto::SpeculativeChoice::kDraft: break;
  }
  SpeculativeConfig config;
  config.method = request.method == proto::SpeculativeChoice::kDraft ? SpeculativeMethod::kDraft
                                                                     : SpeculativeMethod::kNgram;
  config.num_tokens = request.num_tokens == 0 ? 4 : static_cast<int32_t>(request.num_tokens);
  return config;
}

void SpeculationState::OnShadow(bool right) {
  acceptance = (1 - kWeight) * acceptance + kWeight * (right ? 1.0 : 0.0);
}

void SpeculationState::OnVerified(int32_t proposed, int32_t accepted, int32_t max_k) {
  ++num_verify_steps;
  num_draft_tokens += proposed;
  num_accepted_tokens += accepted;
  const double keep = std::pow(1 - kWeight, proposed);
  acceptance = keep * acceptance + (1 - keep) * accepted / proposed;
  k = accepted == proposed ? std::min(max_k, k + 1) : std::min(max_k, accepted + 1);
}

}  // namespace tpserve
