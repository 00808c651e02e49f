// OpenAI request bodies → the coordinator's GenerateRequests. Pure functions: no sockets, no model.
//
// POST /v1/completions: `prompt` is a string, a list of token ids, or a batch (a list of strings or
// a list of lists of ids); each prompt becomes one GenerateRequest with `n` samples, and the reply's
// choices are indexed prompt_index * n + sample_index, as OpenAI does.
// POST /v1/chat/completions: `messages` (roles system/user/assistant; content a string or a list
// of {"type": "text"} parts) become one chat GenerateRequest rendered in the model's chat format.
//
// Every field is type- and range-checked here so a 400 names the field (`param`); the coordinator
// checks again against the model (token ids < V, prompt length vs context).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "client/http/api_error.h"
#include "comm/client_codec.h"

namespace tpserve::http {

enum class Endpoint { kCompletions, kChatCompletions };

inline constexpr uint32_t kDefaultCompletionMaxTokens = 16;  // OpenAI's default for /v1/completions

struct OpenAiRequest {
  Endpoint endpoint = Endpoint::kCompletions;
  std::string model;                            // "" when the body has none
  std::vector<proto::GenerateRequest> prompts;  // [P] one coordinator request per prompt
  // false (chat only): generation may run to the end of the context; the caller sets max_tokens
  // to the context length minus the prompt's tokens (vLLM's default), which it learns by tokenizing.
  bool has_max_tokens = false;
  uint32_t n = 1;
  bool stream = false;
  bool include_usage = false;                   // stream_options.include_usage
  // Completions: the prompt's text before the generated text; with logprobs also the prompt's
  // token logprobs (the first null), from the coordinator's promptLogprobs.
  bool echo = false;
  // echo with max_tokens 0 (lm-eval's loglikelihood): one token is generated and not reported.
  bool discard_output = false;
  // How many top logprobs to report per token; nullopt: no logprobs at all. Completions:
  // `logprobs` (0..20); chat: `logprobs: true` with `top_logprobs` (0..20).
  std::optional<uint32_t> num_top_logprobs;
  bool seed_given = false;
};

using ParsedRequest = std::variant<OpenAiRequest, ApiError>;

ParsedRequest ParseOpenAiRequest(Endpoint endpoint, std::string_view body);

// vLLM's /tokenize body ({"prompt": str} or {"messages": [...]}, "add_special_tokens") and
// /detokenize body ({"tokens": [ids]}).
std::variant<proto::TokenizeRequest, ApiError> ParseTokenizeRequest(std::string_view body);
std::variant<proto::DetokenizeRequest, ApiError> ParseDetokenizeRequest(std::string_view body);

}  // namespace tpserve::http
