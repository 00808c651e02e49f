#include "bench/loadgen/llama_completion.h"

#include <algorithm>

#include "common/json.h"

namespace tpserve::loadgen {

std::string LlamaCompletionRequestJson(const BenchRequest& request) {
  JsonValue prompt = JsonValue::Array();
  for (int32_t id : request.prompt_ids) prompt.Append(JsonValue::Int(id));
  JsonValue body = JsonValue::Object();
  body.Set("prompt", std::move(prompt));
  body.Set("n_predict", JsonValue::Int(request.output_len));
  body.Set("ignore_eos", JsonValue::Bool(true));
  body.Set("temperature", JsonValue::Int(0));
  body.Set("stream", JsonValue::Bool(true));
  body.Set("cache_prompt", JsonValue::Bool(true));
  return body.Dump();
}

StatusOr<LlamaCompletionEvent> ParseLlamaCompletionEvent(std::string_view data) {
  StatusOr<JsonValue> parsed = ParseJson(data);
  if (!parsed.ok() || !parsed->is_object()) {
    return InvalidArgument("llama-server event is not a JSON object: '" + std::string(data.substr(0, 80)) + "'");
  }
  const JsonValue& o = *parsed;
  LlamaCompletionEvent e;
  if (const JsonValue* error = o.Find("error")) {
    const JsonValue* message = error->Find("message");
    e.error = message && message->is_string() ? message->string_value() : "error event without a message";
    return e;
  }
  if (const JsonValue* stop = o.Find("stop"); stop && stop->is_bool()) e.is_stop = stop->bool_value();
  if (const JsonValue* n = o.Find("tokens_predicted"); n && n->is_integer()) e.tokens_predicted = n->int_value();
  if (const JsonValue* tokens = o.Find("tokens"); tokens && tokens->is_array()) {
    e.num_listed_tokens = static_cast<int64_t>(tokens->size());
  } else if (const JsonValue* content = o.Find("content"); content && content->is_string() && !content->string_value().empty()) {
    e.num_listed_tokens = 1;
  }
  if (const JsonValue* timings = o.Find("timings")) {
    if (const JsonValue* cached = timings->Find("cache_n"); cached && cached->is_integer()) {
      e.cached_prompt_tokens = cached->int_value();
    }
    if (const JsonValue* n = timings->Find("predicted_n"); n && n->is_integer() && e.tokens_predicted < 0) {
      e.tokens_predicted = n->int_value();
    }
  }
  return e;
}

int64_t NewTokens(const LlamaCompletionEvent& event, int64_t num_counted) {
  if (event.tokens_predicted >= 0) return std::max<int64_t>(0, event.tokens_predicted - num_counted);
  return event.num_listed_tokens;
}

}  // namespace tpserve::loadgen
