#include "client/http/openai_request.h"

#include <cmath>
#include <limits>

#include <nlohmann/json.hpp>

namespace tpserve::http {
namespace {

using nlohmann::json;

// Inside this file a bad field throws FieldError; the entry points turn it into a 400.
struct FieldError {
  std::string param;
  std::string message;
};

[[noreturn]] void Fail(const std::string& param, const std::string& message) { throw FieldError{param, message}; }

// Strict JSON: the body must be one object. nlohmann rejects malformed UTF-8 inside strings.
json ParseBody(std::string_view body) {
  json j;
  try {
    j = json::parse(body);
  } catch (const json::parse_error& e) {
    Fail("", std::string("the body is not valid JSON (UTF-8): ") + e.what());
  }
  if (!j.is_object()) Fail("", "the body must be a JSON object");
  return j;
}

// The field, or nullptr when absent or null (OpenAI clients send null for "not set").
const json* Find(const json& body, const char* name) {
  auto it = body.find(name);
  if (it == body.end() || it->is_null()) return nullptr;
  return &*it;
}

bool GetBool(const json& body, const char* name, bool fallback) {
  const json* v = Find(body, name);
  if (v == nullptr) return fallback;
  if (!v->is_boolean()) Fail(name, std::string(name) + " must be a boolean");
  return v->get<bool>();
}

double GetNumber(const json& body, const char* name, double fallback, double lo, double hi) {
  const json* v = Find(body, name);
  if (v == nullptr) return fallback;
  if (!v->is_number()) Fail(name, std::string(name) + " must be a number");
  const double x = v->get<double>();
  if (!(x >= lo && x <= hi)) {
    Fail(name, std::string(name) + " = " + v->dump() + " is outside [" + json(lo).dump() + ", " + json(hi).dump() + "]");
  }
  return x;
}

int64_t GetInt(const json& body, const char* name, int64_t fallback, int64_t lo, int64_t hi) {
  const json* v = Find(body, name);
  if (v == nullptr) return fallback;
  if (!v->is_number_integer()) Fail(name, std::string(name) + " must be an integer");
  const int64_t x = v->is_number_unsigned() && v->get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max())
                        ? std::numeric_limits<int64_t>::max()
                        : v->get<int64_t>();
  if (x < lo || x > hi) {
    Fail(name, std::string(name) + " = " + v->dump() + " is outside [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  }
  return x;
}

std::string GetString(const json& body, const char* name, size_t max_bytes) {
  const json* v = Find(body, name);
  if (v == nullptr) return "";
  if (!v->is_string()) Fail(name, std::string(name) + " must be a string");
  std::string s = v->get<std::string>();
  if (s.size() > max_bytes) Fail(name, std::string(name) + " is longer than " + std::to_string(max_bytes) + " bytes");
  return s;
}

int32_t TokenId(const json& v, const std::string& param) {
  if (!v.is_number_integer()) Fail(param, param + " must hold integer token ids");
  const int64_t id = v.is_number_unsigned() ? int64_t(std::min<uint64_t>(v.get<uint64_t>(), 1ull << 40)) : v.get<int64_t>();
  if (id < 0 || id > std::numeric_limits<int32_t>::max()) Fail(param, param + " holds token id " + v.dump() + ", not a valid id");
  return static_cast<int32_t>(id);
}

std::vector<int32_t> TokenIds(const json& list, const std::string& param) {
  if (list.empty()) Fail(param, param + " is empty");
  if (list.size() > proto::kMaxPromptTokens) Fail(param, param + " has more than " + std::to_string(proto::kMaxPromptTokens) + " tokens");
  std::vector<int32_t> ids;
  ids.reserve(list.size());
  for (const json& v : list) ids.push_back(TokenId(v, param));
  return ids;
}

std::string PromptText(const json& v, const std::string& param) {
  std::string s = v.get<std::string>();
  if (s.empty()) Fail(param, param + " is empty");
  if (s.size() > proto::kMaxTextBytes) Fail(param, param + " is longer than " + std::to_string(proto::kMaxTextBytes) + " bytes");
  return s;
}

// `prompt` of /v1/completions: one request per prompt, the rest of the fields filled later.
std::vector<proto::GenerateRequest> CompletionPrompts(const json& body) {
  const json* prompt = Find(body, "prompt");
  if (prompt == nullptr) Fail("prompt", "prompt is required");
  std::vector<proto::GenerateRequest> out;
  auto text = [&](std::string s) {
    proto::GenerateRequest r;
    r.prompt_kind = proto::PromptKind::kText;
    r.prompt_text = std::move(s);
    out.push_back(std::move(r));
  };
  auto ids = [&](std::vector<int32_t> v) {
    proto::GenerateRequest r;
    r.prompt_kind = proto::PromptKind::kTokenIds;
    r.prompt_ids = std::move(v);
    out.push_back(std::move(r));
  };
  if (prompt->is_string()) {
    text(PromptText(*prompt, "prompt"));
  } else if (prompt->is_array() && !prompt->empty() && (*prompt)[0].is_number()) {
    ids(TokenIds(*prompt, "prompt"));
  } else if (prompt->is_array() && !prompt->empty()) {
    if (prompt->size() > 256) Fail("prompt", "a batch holds at most 256 prompts");
    for (size_t i = 0; i < prompt->size(); ++i) {
      const json& p = (*prompt)[i];
      const std::string param = "prompt[" + std::to_string(i) + "]";
      if (p.is_string()) {
        text(PromptText(p, param));
      } else if (p.is_array()) {
        ids(TokenIds(p, param));
      } else {
        Fail("prompt", param + " must be a string or a list of token ids");
      }
    }
  } else {
    Fail("prompt", "prompt must be a string, a list of token ids, or a non-empty list of either");
  }
  return out;
}

std::string ContentText(const json& content, const std::string& param) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) Fail(param, param + " must be a string or a list of text parts");
  std::string text;
  for (const json& part : content) {
    if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text") || !part["text"].is_string()) {
      Fail(param, param + " parts must be {\"type\": \"text\", \"text\": string} (only text is supported)");
    }
    text += part["text"].get<std::string>();
  }
  return text;
}

std::vector<proto::ChatMessage> ChatMessages(const json& body) {
  const json* messages = Find(body, "messages");
  if (messages == nullptr) Fail("messages", "messages is required");
  if (!messages->is_array() || messages->empty()) Fail("messages", "messages must be a non-empty list");
  if (messages->size() > proto::kMaxChatMessages) Fail("messages", "messages holds more than " + std::to_string(proto::kMaxChatMessages));
  std::vector<proto::ChatMessage> out;
  for (size_t i = 0; i < messages->size(); ++i) {
    const json& m = (*messages)[i];
    const std::string param = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) Fail(param, param + " must be an object");
    auto role = m.find("role");
    if (role == m.end() || !role->is_string()) Fail(param + ".role", param + ".role must be a string");
    const std::string r = role->get<std::string>();
    if (r != "system" && r != "user" && r != "assistant") {
      Fail(param + ".role", param + ".role \"" + r.substr(0, 32) + "\" is not system, user or assistant");
    }
    auto content = m.find("content");
    if (content == m.end() || content->is_null()) Fail(param + ".content", param + ".content is required");
    out.push_back({r, ContentText(*content, param + ".content")});
  }
  return out;
}

std::vector<std::string> StopStrings(const json& body) {
  const json* stop = Find(body, "stop");
  if (stop == nullptr) return {};
  std::vector<std::string> out;
  if (stop->is_string()) {
    out.push_back(stop->get<std::string>());
  } else if (stop->is_array()) {
    for (const json& s : *stop) {
      if (!s.is_string()) Fail("stop", "stop must be a string or a list of strings");
      out.push_back(s.get<std::string>());
    }
  } else {
    Fail("stop", "stop must be a string or a list of strings");
  }
  if (out.size() > proto::kMaxStopStrings) Fail("stop", "stop holds more than " + std::to_string(proto::kMaxStopStrings) + " strings");
  for (const std::string& s : out) {
    if (s.empty() || s.size() > proto::kMaxStopStringBytes) {
      Fail("stop", "each stop string must be 1.." + std::to_string(proto::kMaxStopStringBytes) + " bytes");
    }
  }
  return out;
}

std::vector<std::pair<int32_t, float>> LogitBias(const json& body) {
  const json* bias = Find(body, "logit_bias");
  if (bias == nullptr) return {};
  if (!bias->is_object()) Fail("logit_bias", "logit_bias must be an object {\"token id\": bias}");
  if (bias->size() > proto::kMaxLogitBias) Fail("logit_bias", "logit_bias holds more than " + std::to_string(proto::kMaxLogitBias) + " entries");
  std::vector<std::pair<int32_t, float>> out;
  for (const auto& [key, value] : bias->items()) {
    size_t used = 0;
    long long id = -1;
    try {
      id = std::stoll(key, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != key.size() || id < 0 || id > std::numeric_limits<int32_t>::max()) {
      Fail("logit_bias", "logit_bias key \"" + key.substr(0, 32) + "\" is not a token id");
    }
    if (!value.is_number() || !(value.get<double>() >= -100.0 && value.get<double>() <= 100.0)) {
      Fail("logit_bias", "logit_bias[\"" + key + "\"] must be a number in [-100, 100]");
    }
    out.emplace_back(static_cast<int32_t>(id), value.get<float>());
  }
  return out;
}

// tpserve's extra field `speculative`: {"method": "ngram" | "draft" | "off", "k": 1..16} (vLLM's name
// "num_speculative_tokens" for k is accepted too). Absent: the server's --speculative.
proto::SpeculativeRequest Speculative(const json& body) {
  proto::SpeculativeRequest out;
  const json* spec = Find(body, "speculative");
  if (spec == nullptr) return out;
  if (!spec->is_object()) Fail("speculative", "speculative must be an object {\"method\": \"ngram\", \"k\": 4}");
  const std::string method = GetString(*spec, "method", 16);
  if (method == "ngram") {
    out.method = proto::SpeculativeChoice::kNgram;
  } else if (method == "draft") {
    out.method = proto::SpeculativeChoice::kDraft;
  } else if (method == "off") {
    out.method = proto::SpeculativeChoice::kOff;
  } else {
    Fail("speculative", "speculative.method must be \"ngram\", \"draft\" or \"off\"");
  }
  const char* k_name = Find(*spec, "num_speculative_tokens") ? "num_speculative_tokens" : "k";
  if (const json* k = Find(*spec, k_name)) {
    if (!k->is_number_integer() || k->get<int64_t>() < 1 || k->get<int64_t>() > int64_t{proto::kMaxSpeculativeTokens}) {
      Fail("speculative", std::string("speculative.") + k_name + " must be an integer in [1, " +
                              std::to_string(proto::kMaxSpeculativeTokens) + "], got " + k->dump());
    }
    out.num_tokens = k->get<uint32_t>();
  }
  return out;
}

// vLLM's beam search fields: use_beam_search, best_of (the width, at least n; default n),
// length_penalty, early_stopping (false, true or "never", as in Hugging Face transformers).
BeamConfig Beam(const json& body, uint32_t n) {
  BeamConfig out;
  if (!GetBool(body, "use_beam_search", false)) return out;
  out.width = static_cast<int32_t>(GetInt(body, "best_of", n, 1, kMaxBeamWidth));
  if (out.width < static_cast<int32_t>(n)) Fail("best_of", "best_of (the beam width) must be at least n");
  out.length_penalty = static_cast<float>(GetNumber(body, "length_penalty", 1.0, -10.0, 10.0));
  if (const json* early = Find(body, "early_stopping")) {
    if (early->is_boolean()) {
      out.early_stopping = early->get<bool>() ? EarlyStopping::kWhenFull : EarlyStopping::kHeuristic;
    } else if (early->is_string() && early->get<std::string>() == "never") {
      out.early_stopping = EarlyStopping::kNever;
    } else {
      Fail("early_stopping", "early_stopping must be true, false or \"never\"");
    }
  }
  return out;
}

// The sampling, stopping and output fields both endpoints share, applied to every prompt.
void ApplyCommonFields(const json& body, OpenAiRequest* r) {
  r->model = GetString(body, "model", 256);
  r->stream = GetBool(body, "stream", false);
  if (const json* options = Find(body, "stream_options")) {
    if (!options->is_object()) Fail("stream_options", "stream_options must be an object");
    r->include_usage = GetBool(*options, "include_usage", false);
  }
  r->n = static_cast<uint32_t>(GetInt(body, "n", 1, 1, 16));

  proto::GenerateRequest common;
  SamplingParams& s = common.sampling;
  s.temperature = static_cast<float>(GetNumber(body, "temperature", 1.0, 0.0, 2.0));
  s.top_p = static_cast<float>(GetNumber(body, "top_p", 1.0, 0.0, 1.0));
  if (s.top_p <= 0.0f) Fail("top_p", "top_p must be greater than 0");
  const int64_t top_k = GetInt(body, "top_k", 0, -1, std::numeric_limits<int32_t>::max());
  s.top_k = top_k < 0 ? 0 : static_cast<int32_t>(top_k);  // -1 (vLLM) and 0: off
  s.min_p = static_cast<float>(GetNumber(body, "min_p", 0.0, 0.0, 1.0));
  s.presence_penalty = static_cast<float>(GetNumber(body, "presence_penalty", 0.0, -2.0, 2.0));
  s.frequency_penalty = static_cast<float>(GetNumber(body, "frequency_penalty", 0.0, -2.0, 2.0));
  s.repetition_penalty = static_cast<float>(GetNumber(body, "repetition_penalty", 1.0, 0.0, 10.0));
  if (s.repetition_penalty <= 0.0f) Fail("repetition_penalty", "repetition_penalty must be greater than 0");
  s.logit_bias = LogitBias(body);
  if (const json* seed = Find(body, "seed")) {
    if (!seed->is_number_integer()) Fail("seed", "seed must be an integer");
    s.seed = seed->is_number_unsigned() ? seed->get<uint64_t>() : static_cast<uint64_t>(seed->get<int64_t>());
    s.has_seed = true;
    r->seed_given = true;
  }
  common.stop = StopStrings(body);
  common.ignore_eos = GetBool(body, "ignore_eos", false);
  common.user = GetString(body, "user", proto::kMaxUserBytes);
  common.speculative = Speculative(body);
  common.beam = Beam(body, r->n);
  // Beam search ranks the raw distribution: temperature 0 unless the request says otherwise (and fails).
  if (common.beam.enabled() && Find(body, "temperature") == nullptr) s.temperature = 0.0f;
  common.n = r->n;
  common.stream = true;  // the gateway reassembles non-streamed replies itself

  const char* max_name = Find(body, "max_completion_tokens") ? "max_completion_tokens" : "max_tokens";
  const int64_t max_tokens = GetInt(body, max_name, -1, 0, 1 << 30);
  r->has_max_tokens = max_tokens >= 0 || r->endpoint == Endpoint::kCompletions;
  if (max_tokens == 0 && !r->echo) Fail(max_name, std::string(max_name) + " must be at least 1 (0 only with echo)");
  r->discard_output = max_tokens == 0;
  common.max_tokens = max_tokens > 0 ? static_cast<uint32_t>(max_tokens)
                      : max_tokens == 0 ? 1u
                                        : kDefaultCompletionMaxTokens;

  if (r->num_top_logprobs) s.num_logprobs = static_cast<int32_t>(std::max<uint32_t>(*r->num_top_logprobs, 1));
  common.prompt_logprobs = r->echo && r->num_top_logprobs.has_value();

  for (proto::GenerateRequest& p : r->prompts) {
    proto::GenerateRequest merged = common;
    merged.prompt_kind = p.prompt_kind;
    merged.prompt_text = std::move(p.prompt_text);
    merged.prompt_ids = std::move(p.prompt_ids);
    merged.chat = std::move(p.chat);
    p = std::move(merged);
  }
}

template <typename T, typename F>
std::variant<T, ApiError> Guard(F&& parse) {
  try {
    return parse();
  } catch (const FieldError& e) {
    return InvalidRequest(e.param, e.message);
  } catch (const nlohmann::json::exception& e) {  // a type mismatch the checks above missed
    return InvalidRequest("", std::string("malformed request: ") + e.what());
  }
}

}  // namespace

ParsedRequest ParseOpenAiRequest(Endpoint endpoint, std::string_view body_text) {
  return Guard<OpenAiRequest>([&] {
    const json body = ParseBody(body_text);
    OpenAiRequest r;
    r.endpoint = endpoint;
    if (endpoint == Endpoint::kCompletions) {
      r.prompts = CompletionPrompts(body);
      r.echo = GetBool(body, "echo", false);
      if (Find(body, "logprobs")) r.num_top_logprobs = static_cast<uint32_t>(GetInt(body, "logprobs", 0, 0, 20));
      if (r.echo && r.stream) Fail("echo", "echo is not supported with stream");
    } else {
      proto::GenerateRequest chat;
      chat.prompt_kind = proto::PromptKind::kChat;
      chat.chat = ChatMessages(body);
      r.prompts.push_back(std::move(chat));
      if (GetBool(body, "logprobs", false)) {
        r.num_top_logprobs = static_cast<uint32_t>(GetInt(body, "top_logprobs", 0, 0, 20));
      } else if (Find(body, "top_logprobs")) {
        Fail("top_logprobs", "top_logprobs needs logprobs: true");
      }
    }
    ApplyCommonFields(body, &r);
    return r;
  });
}

std::variant<proto::TokenizeRequest, ApiError> ParseTokenizeRequest(std::string_view body_text) {
  return Guard<proto::TokenizeRequest>([&] {
    const json body = ParseBody(body_text);
    proto::TokenizeRequest r;
    if (Find(body, "messages")) {
      r.prompt_kind = proto::PromptKind::kChat;
      r.chat = ChatMessages(body);
    } else {
      const json* prompt = Find(body, "prompt");
      if (prompt == nullptr || !prompt->is_string()) Fail("prompt", "prompt (a string) or messages is required");
      r.prompt_kind = proto::PromptKind::kText;
      r.prompt_text = prompt->get<std::string>();
      if (r.prompt_text.size() > proto::kMaxTextBytes) Fail("prompt", "prompt is too long");
    }
    r.add_special_tokens = GetBool(body, "add_special_tokens", true);
    return r;
  });
}

std::variant<proto::DetokenizeRequest, ApiError> ParseDetokenizeRequest(std::string_view body_text) {
  return Guard<proto::DetokenizeRequest>([&] {
    const json body = ParseBody(body_text);
    const json* tokens = Find(body, "tokens");
    if (tokens == nullptr || !tokens->is_array()) Fail("tokens", "tokens (a list of token ids) is required");
    proto::DetokenizeRequest r;
    if (!tokens->empty()) r.token_ids = TokenIds(*tokens, "tokens");
    return r;
  });
}

}  // namespace tpserve::http
