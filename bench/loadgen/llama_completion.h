// LlamaCompletion: the request body and the streamed replies of llama.cpp's llama-server native
// endpoint POST /completion (tools/server/README.md), as the load generator uses it.
//
// Request: the prompt as token ids (no re-tokenisation, the same ids tpserve gets), n_predict =
// output_len with ignore_eos (exact lengths), temperature 0 (greedy, as tpserve's runs), stream on,
// cache_prompt on (llama-server's prefix reuse, as tpserve's prefix cache is on by default).
//
// Each SSE event's data is one JSON object:
//  - a partial: {"content": text, "tokens": [id], "stop": false, "tokens_predicted": n, ...}, where n
//    counts the tokens generated so far. llama-server sends one per token, except that a token
//    ending inside a UTF-8 character is held back and goes out with the next one (n then grows by
//    2 while "tokens" still lists one id). So an event's new tokens are n minus the previous n —
//    the server's own count, the same quantity as tpserve's token chunks.
//  - the final: {"stop": true, "content": "", "tokens_predicted": n, "timings": {"cache_n": prompt
//    tokens reused from the cache, "predicted_n": n, ...}} (in a stream its tokens went out already).
//  - an error: {"error": {"code": c, "message": m, "type": t}}; the stream ends after it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "bench/loadgen/dataset.h"
#include "common/status.h"

namespace tpserve::loadgen {

std::string LlamaCompletionRequestJson(const BenchRequest& request);

struct LlamaCompletionEvent {
  bool is_stop = false;
  int64_t tokens_predicted = -1;     // the server's running count of generated tokens (< 0: absent)
  int64_t num_listed_tokens = 0;     // ids in "tokens", or 1 for non-empty "content" without them
  int64_t cached_prompt_tokens = 0;  // timings.cache_n (final event)
  std::string error;                 // non-empty: the server reported an error
};

// INVALID_ARGUMENT when `data` is not a JSON object (e.g. a proxy's "[DONE]" or a cut-off line).
StatusOr<LlamaCompletionEvent> ParseLlamaCompletionEvent(std::string_view data);

// Tokens an event adds to a request that has `num_counted` so far: the growth of tokens_predicted
// when the server reports it (never negative), else the listed tokens.
int64_t NewTokens(const LlamaCompletionEvent& event, int64_t num_counted);

}  // namespace tpserve::loadgen
