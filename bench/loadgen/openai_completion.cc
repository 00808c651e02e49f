#include "bench/loadgen/openai_completion.h"

#include "common/json.h"

namespace tpserve::loadgen {

std::string OpenAiCompletionRequestJson(const BenchRequest& request, const std::string& model) {
  JsonValue prompt = JsonValue::Array();
  for (int32_t id : request.prompt_ids) prompt.Append(JsonValue::Int(id));
  JsonValue stream_options = JsonValue::Object();
  stream_options.Set("include_usage", JsonValue::Bool(true));
  JsonValue body = JsonValue::Object();
  body.Set("model", JsonValue::String(model));
  body.Set("prompt", std::move(prompt));
  body.Set("max_tokens", JsonValue::Int(request.output_len));
  body.Set("ignore_eos", JsonValue::Bool(true));
  body.Set("temperature", JsonValue::Int(0));
  body.Set("stream", JsonValue::Bool(true));
  body.Set("stream_options", std::move(stream_options));
  return body.Dump();
}

StatusOr<OpenAiCompletionEvent> ParseOpenAiCompletionEvent(std::string_view data) {
  OpenAiCompletionEvent e;
  if (data == "[DONE]") {
    e.is_done = true;
    return e;
  }
  StatusOr<JsonValue> parsed = ParseJson(data);
  if (!parsed.ok() || !parsed->is_object()) {
    return InvalidArgument("completion event is not a JSON object: '" + std::string(data.substr(0, 80)) + "'");
  }
  const JsonValue& o = *parsed;
  if (const JsonValue* error = o.Find("error")) {
    const JsonValue* message = error->Find("message");
    e.error = message && message->is_string() ? message->string_value() : "error event without a message";
    return e;
  }
  if (const JsonValue* choices = o.Find("choices"); choices && choices->is_array()) {
    for (size_t i = 0; i < choices->size(); ++i) {
      const JsonValue* text = (*choices)[i].Find("text");
      if (text && text->is_string() && !text->string_value().empty()) e.num_tokens = 1;
    }
  }
  if (const JsonValue* usage = o.Find("usage"); usage && usage->is_object()) {
    if (const JsonValue* n = usage->Find("completion_tokens"); n && n->is_integer()) e.completion_tokens = n->int_value();
    if (const JsonValue* details = usage->Find("prompt_tokens_details")) {
      if (const JsonValue* cached = details->Find("cached_tokens"); cached && cached->is_integer()) {
        e.cached_prompt_tokens = cached->int_value();
      }
    }
  }
  return e;
}

}  // namespace tpserve::loadgen
