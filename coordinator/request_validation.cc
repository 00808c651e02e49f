#include "coordinator/request_validation.h"

#include <cmath>
#include <string>

#include "coordinator/speculation.h"

namespace tpserve {
namespace {

Status CheckRange(const char* name, double value, double lo, double hi) {
  if (!(value >= lo && value <= hi)) {  // also rejects NaN
    return InvalidArgument(std::string(name) + " = " + std::to_string(value) + " is outside [" +
                           std::to_string(lo) + ", " + std::to_string(hi) + "]");
  }
  return OkStatus();
}

Status CheckTokenId(const char* name, int32_t id, int32_t vocab_size) {
  if (id < 0 || id >= vocab_size) {
    return InvalidArgument(std::string(name) + " contains token id " + std::to_string(id) +
                           ", outside the vocabulary [0, " + std::to_string(vocab_size) + ")");
  }
  return OkStatus();
}

}  // namespace

Status ValidateGenerateRequest(const proto::GenerateRequest& r, const ModelLimits& limits) {
  const SamplingParams& s = r.sampling;
  RETURN_IF_ERROR(CheckRange("temperature", s.temperature, 0.0, kMaxTemperature));
  RETURN_IF_ERROR(CheckRange("top_k", s.top_k, 0, limits.vocab_size));
  if (!(s.top_p > 0.0f && s.top_p <= 1.0f)) {
    return InvalidArgument("top_p = " + std::to_string(s.top_p) + " is outside (0, 1]");
  }
  RETURN_IF_ERROR(CheckRange("min_p", s.min_p, 0.0, 1.0));
  if (!(s.repetition_penalty > 0.0f && s.repetition_penalty <= 10.0f)) {
    return InvalidArgument("repetition_penalty = " + std::to_string(s.repetition_penalty) + " is outside (0, 10]");
  }
  RETURN_IF_ERROR(CheckRange("presence_penalty", s.presence_penalty, -2.0, 2.0));
  RETURN_IF_ERROR(CheckRange("frequency_penalty", s.frequency_penalty, -2.0, 2.0));
  for (const auto& [id, bias] : s.logit_bias) {
    RETURN_IF_ERROR(CheckTokenId("logit_bias", id, limits.vocab_size));
    RETURN_IF_ERROR(CheckRange("logit_bias value", bias, -100.0, 100.0));
  }
  RETURN_IF_ERROR(CheckRange("num_logprobs", s.num_logprobs, 0, kMaxLogprobs));
  if (r.max_tokens < 1) return InvalidArgument("max_tokens must be at least 1");
  if (r.speculative.num_tokens > static_cast<uint32_t>(kMaxSpeculativeTokens)) {
    return InvalidArgument("speculative num_tokens = " + std::to_string(r.speculative.num_tokens) +
                           " is outside [1, " + std::to_string(kMaxSpeculativeTokens) + "] (0: the default, 4)");
  }
  if (r.n < 1 || r.n > kMaxSamples) {
    return InvalidArgument("n = " + std::to_string(r.n) + " is outside [1, " + std::to_string(kMaxSamples) + "]");
  }
  for (int32_t id : r.stop_token_ids) RETURN_IF_ERROR(CheckTokenId("stop_token_ids", id, limits.vocab_size));
  switch (r.prompt_kind) {
    case proto::PromptKind::kText:
      if (r.prompt_text.empty()) return InvalidArgument("the prompt is empty");
      break;
    case proto::PromptKind::kTokenIds:
      if (r.prompt_ids.empty()) return InvalidArgument("the prompt is empty");
      for (int32_t id : r.prompt_ids) RETURN_IF_ERROR(CheckTokenId("prompt", id, limits.vocab_size));
      break;
    case proto::PromptKind::kChat:
      if (r.chat.empty()) return InvalidArgument("the chat has no messages");
      for (const proto::ChatMessage& m : r.chat) {
        if (m.role != "system" && m.role != "user" && m.role != "assistant") {
          return InvalidArgument("chat role \"" + m.role.substr(0, 32) + "\" is not system, user or assistant");
        }
      }
      break;
  }
  return OkStatus();
}

Status ValidatePromptLength(const std::vector<int32_t>& prompt_ids, const ModelLimits& limits) {
  if (prompt_ids.empty()) return InvalidArgument("the prompt is empty after tokenization");
  if (static_cast<int64_t>(prompt_ids.size()) >= limits.context_length) {
    return OutOfRange("the prompt has " + std::to_string(prompt_ids.size()) +
                      " tokens; the model's context holds " + std::to_string(limits.context_length) +
                      " including at least one output token");
  }
  return OkStatus();
}

}  // namespace tpserve
