// ResponseAssembler: the coordinator's messages for one OpenAI request → OpenAI reply JSON. Pure:
// the caller feeds it every message of the request's P prompts and writes what it returns.
//
// Choice c = prompt_index * n + sample_index (OpenAI's indexing for batches with n > 1).
// Streamed: each chunk becomes one SSE payload ({"object": "text_completion" | "chat.completion.chunk",
// "choices": [one choice]}); a sample's finish becomes a payload with its finish_reason; Tail() is
// the usage payload (stream_options.include_usage). Non-streamed: Body() once every sample finished.
//
// The gateway owns no tokenizer, so a logprob's token is written "token_id:<id>" (vLLM's
// return_tokens_as_token_ids spelling): lm-eval and other consumers compare tokens with tokens.
// `usage` always carries prompt_tokens_details.cached_tokens (prefix-cache hits); `seed` (a
// top-level extension, as vLLM's) is the seed the coordinator used, which replays the reply;
// `replays` (another) is how many times it was re-run after its worker group was lost (README).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "client/http/openai_request.h"
#include "comm/client_codec.h"

namespace tpserve::http {

class ResponseAssembler {
 public:
  // `request` must outlive the assembler. `id` is the reply id (cmpl-…/chatcmpl-…), `created` Unix seconds.
  ResponseAssembler(const OpenAiRequest& request, std::string id, std::string model, int64_t created);

  // The text echo prepends to prompt p's choices (text prompts set it themselves; token-id
  // prompts learn it by detokenizing). REQUIRES: before the prompt's first chunk.
  void SetEchoText(size_t prompt_index, std::string text);

  // One message (chunk, promptLogprobs or finish) of prompt p. Returns the SSE payloads to send
  // now (streamed requests; empty otherwise). Other kinds are ignored.
  std::vector<std::string> OnMessage(size_t prompt_index, const proto::ServerMessage& message);

  bool is_done() const { return num_finished_ == choices_.size(); }
  // Whether every prompt's promptLogprobs arrived (what echo with logprobs needs).
  bool has_prompt_logprobs() const;
  // REQUIRES: is_done(). The whole reply (non-streamed requests).
  std::string Body() const;
  // REQUIRES: is_done(). The usage payload, or "" when the client did not ask for it.
  std::string Tail() const;

 private:
  struct Choice {
    std::string text;
    std::vector<int32_t> token_ids;
    std::vector<proto::TokenLogprobs> logprobs;  // [token_ids.size()] when logprobs were asked
    bool is_started = false;                     // streamed: the first payload went out
    bool is_finished = false;
    std::string finish_reason;
  };
  struct Prompt {
    std::string echo_text;
    proto::PromptLogprobs prompt_logprobs;
    bool has_prompt_logprobs = false;
    proto::Usage usage;  // of sample 0 (prompt tokens, cached tokens); completion tokens summed
    uint32_t completion_tokens = 0;
    uint64_t seed = 0;
    uint32_t num_replays = 0;  // the most any of its samples was replayed (a lost worker group)
  };
  // Over the prompts: the `replays` extension.
  uint32_t NumReplays() const;

  const OpenAiRequest& request_;
  std::string id_;
  std::string model_;
  int64_t created_;
  std::vector<Choice> choices_;  // [P * n]
  std::vector<Prompt> prompts_;  // [P]
  size_t num_finished_ = 0;
};

// {"prompt_tokens", "completion_tokens", "total_tokens", "prompt_tokens_details": {"cached_tokens"}}.
std::string UsageJson(uint32_t prompt_tokens, uint32_t completion_tokens, uint32_t cached_tokens);

// "data: <payload>\n\n", the SSE framing of every event; kSseDone ends a stream.
std::string SseEvent(const std::string& payload);
inline constexpr const char* kSseDone = "data: [DONE]\n\n";

}  // namespace tpserve::http
