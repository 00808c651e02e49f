// OpenAiCompletion: the request body and the streamed replies of the OpenAI API's
// POST /v1/completions as the load generator uses it — the same endpoint on tpserve's HTTP gateway
// (client/http/) and on llama.cpp's llama-server, so both are measured through one protocol.
//
// Request: {"model", "prompt": [token ids] (no re-tokenisation: the ids tpserve's ZeroMQ backend
// sends), "max_tokens": output_len with "ignore_eos" (exact lengths), "temperature": 0 (greedy),
// "stream": true, "stream_options": {"include_usage": true}}.
//
// Each SSE event's data is one of:
//  - a chunk: {"choices": [{"text": t, "finish_reason": ...}], ...}. A chunk whose choices carry
//    non-empty text counts as 1 token, as vLLM's benchmark_serving counts them (a server may put
//    several tokens in one chunk, or hold back a token that ends inside a UTF-8 character: the
//    usage total corrects the sum at the end).
//  - the usage chunk (include_usage): {"choices": [], "usage": {"completion_tokens": n,
//    "prompt_tokens_details": {"cached_tokens": c}}}: the server's own totals.
//  - an error: {"error": {"message": m, ...}}; the request failed.
//  - the literal [DONE]: the stream's end.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "bench/loadgen/dataset.h"
#include "common/status.h"

namespace tpserve::loadgen {

std::string OpenAiCompletionRequestJson(const BenchRequest& request, const std::string& model);

struct OpenAiCompletionEvent {
  bool is_done = false;              // data: [DONE]
  int64_t num_tokens = 0;            // 1 when a choice carries non-empty text, else 0
  int64_t completion_tokens = -1;    // usage.completion_tokens (< 0: no usage in this event)
  int64_t cached_prompt_tokens = 0;  // usage.prompt_tokens_details.cached_tokens, when present
  std::string error;                 // non-empty: the server reported an error
};

// INVALID_ARGUMENT when `data` is neither [DONE] nor a JSON object (e.g. a cut-off line).
StatusOr<OpenAiCompletionEvent> ParseOpenAiCompletionEvent(std::string_view data);

}  // namespace tpserve::loadgen
