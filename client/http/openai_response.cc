#include "client/http/openai_response.h"

#include <algorithm>
#include <nlohmann/json.hpp>

namespace tpserve::http {
namespace {

using nlohmann::json;

std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

std::string TokenName(int32_t id) { return "token_id:" + std::to_string(id); }

const char* FinishReasonText(proto::FinishReason reason) {
  return reason == proto::FinishReason::kLength ? "length" : "stop";
}

json UsageObject(uint32_t prompt_tokens, uint32_t completion_tokens, uint32_t cached_tokens) {
  return {{"prompt_tokens", prompt_tokens},
          {"completion_tokens", completion_tokens},
          {"total_tokens", prompt_tokens + completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", cached_tokens}}}};
}

// The completions shape: {"tokens", "token_logprobs", "top_logprobs"}; a prompt's first token has
// null logprobs (nothing predicts it).
json CompletionLogprobs(const proto::PromptLogprobs* prompt, const std::vector<int32_t>& ids,
                        const std::vector<proto::TokenLogprobs>& logprobs, uint32_t num_top) {
  json tokens = json::array(), token_logprobs = json::array(), top_logprobs = json::array();
  auto add = [&](int32_t id, const proto::TokenLogprobs* lp) {
    tokens.push_back(TokenName(id));
    if (lp == nullptr) {
      token_logprobs.push_back(nullptr);
      top_logprobs.push_back(nullptr);
      return;
    }
    token_logprobs.push_back(lp->logprob);
    json top = json::object();
    for (size_t k = 0; k < lp->top.size() && k < num_top; ++k) top[TokenName(lp->top[k].token_id)] = lp->top[k].logprob;
    top_logprobs.push_back(std::move(top));
  };
  if (prompt != nullptr) {
    for (size_t i = 0; i < prompt->token_ids.size(); ++i) {
      add(prompt->token_ids[i], i == 0 || i - 1 >= prompt->logprobs.size() ? nullptr : &prompt->logprobs[i - 1]);
    }
  }
  for (size_t i = 0; i < ids.size(); ++i) add(ids[i], i < logprobs.size() ? &logprobs[i] : nullptr);
  return {{"tokens", tokens}, {"token_logprobs", token_logprobs}, {"top_logprobs", top_logprobs}};
}

// The chat shape: {"content": [{"token", "logprob", "bytes", "top_logprobs": [{...}]}]}.
json ChatLogprobs(const std::vector<int32_t>& ids, const std::vector<proto::TokenLogprobs>& logprobs, uint32_t num_top) {
  json content = json::array();
  for (size_t i = 0; i < ids.size() && i < logprobs.size(); ++i) {
    json top = json::array();
    for (size_t k = 0; k < logprobs[i].top.size() && k < num_top; ++k) {
      top.push_back({{"token", TokenName(logprobs[i].top[k].token_id)}, {"logprob", logprobs[i].top[k].logprob}, {"bytes", nullptr}});
    }
    content.push_back({{"token", TokenName(ids[i])}, {"logprob", logprobs[i].logprob}, {"bytes", nullptr}, {"top_logprobs", top}});
  }
  return {{"content", content}};
}

}  // namespace

std::string UsageJson(uint32_t prompt_tokens, uint32_t completion_tokens, uint32_t cached_tokens) {
  return Dump(UsageObject(prompt_tokens, completion_tokens, cached_tokens));
}

std::string SseEvent(const std::string& payload) { return "data: " + payload + "\n\n"; }

ResponseAssembler::ResponseAssembler(const OpenAiRequest& request, std::string id, std::string model, int64_t created)
    : request_(request), id_(std::move(id)), model_(std::move(model)), created_(created),
      choices_(request.prompts.size() * request.n), prompts_(request.prompts.size()) {
  for (size_t p = 0; p < prompts_.size(); ++p) {
    if (request.echo && request.prompts[p].prompt_kind == proto::PromptKind::kText) {
      prompts_[p].echo_text = request.prompts[p].prompt_text;
    }
  }
}

void ResponseAssembler::SetEchoText(size_t prompt_index, std::string text) {
  prompts_.at(prompt_index).echo_text = std::move(text);
}

namespace {

// One choice of a reply or stream payload.
json ChoiceJson(const OpenAiRequest& r, size_t index, const std::string& text, const json& logprobs,
                const std::string& finish_reason, bool is_stream, bool is_first) {
  json choice = {{"index", index}, {"logprobs", logprobs}};
  choice["finish_reason"] = finish_reason.empty() ? json(nullptr) : json(finish_reason);
  if (r.endpoint == Endpoint::kCompletions) {
    choice["text"] = text;
  } else if (is_stream) {
    json delta = json::object();
    if (is_first) delta["role"] = "assistant";
    if (!text.empty() || (is_first && finish_reason.empty())) delta["content"] = text;
    choice["delta"] = std::move(delta);
  } else {
    choice["message"] = {{"role", "assistant"}, {"content", text}};
  }
  return choice;
}

}  // namespace

std::vector<std::string> ResponseAssembler::OnMessage(size_t prompt_index, const proto::ServerMessage& m) {
  Prompt& prompt = prompts_.at(prompt_index);
  std::vector<std::string> out;
  const bool is_chat = request_.endpoint == Endpoint::kChatCompletions;
  const json base = {{"id", id_}, {"object", is_chat ? "chat.completion.chunk" : "text_completion"},
                     {"created", created_}, {"model", model_}};
  auto emit = [&](json choice) {
    if (!request_.stream) return;
    json payload = base;
    payload["choices"] = json::array({std::move(choice)});
    out.push_back(Dump(payload));
  };
  switch (m.kind) {
    case proto::ServerMessageKind::kPromptLogprobs:
      prompt.prompt_logprobs = m.prompt_logprobs;
      prompt.has_prompt_logprobs = true;
      break;
    case proto::ServerMessageKind::kChunk: {
      if (m.chunk.sample_index >= request_.n || request_.discard_output) break;
      const size_t index = prompt_index * request_.n + m.chunk.sample_index;
      Choice& c = choices_[index];
      c.text += m.chunk.text;
      c.token_ids.insert(c.token_ids.end(), m.chunk.token_ids.begin(), m.chunk.token_ids.end());
      c.logprobs.insert(c.logprobs.end(), m.chunk.logprobs.begin(), m.chunk.logprobs.end());
      if (m.chunk.text.empty() && m.chunk.token_ids.empty() && c.is_started) break;
      json logprobs = nullptr;
      if (request_.num_top_logprobs) {
        logprobs = is_chat ? ChatLogprobs(m.chunk.token_ids, m.chunk.logprobs, *request_.num_top_logprobs)
                           : CompletionLogprobs(nullptr, m.chunk.token_ids, m.chunk.logprobs, *request_.num_top_logprobs);
      }
      emit(ChoiceJson(request_, index, m.chunk.text, logprobs, "", true, !c.is_started));
      c.is_started = true;
      break;
    }
    case proto::ServerMessageKind::kFinish: {
      if (m.finish.sample_index >= request_.n) break;
      const size_t index = prompt_index * request_.n + m.finish.sample_index;
      Choice& c = choices_[index];
      if (c.is_finished) break;
      c.is_finished = true;
      ++num_finished_;
      c.finish_reason = FinishReasonText(m.finish.reason);
      if (m.finish.sample_index == 0) {
        prompt.usage = m.finish.usage;
        prompt.seed = m.finish.seed;
      }
      prompt.num_replays = std::max(prompt.num_replays, m.finish.num_replays);
      prompt.completion_tokens += request_.discard_output ? 0 : m.finish.usage.completion_tokens;
      emit(ChoiceJson(request_, index, "", nullptr, c.finish_reason, true, !c.is_started));
      c.is_started = true;
      break;
    }
    default:
      break;
  }
  return out;
}

bool ResponseAssembler::has_prompt_logprobs() const {
  for (const Prompt& prompt : prompts_) {
    if (!prompt.has_prompt_logprobs) return false;
  }
  return true;
}

std::string ResponseAssembler::Body() const {
  const bool is_chat = request_.endpoint == Endpoint::kChatCompletions;
  json choices = json::array();
  uint32_t prompt_tokens = 0, completion_tokens = 0, cached_tokens = 0;
  for (size_t p = 0; p < prompts_.size(); ++p) {
    const Prompt& prompt = prompts_[p];
    prompt_tokens += prompt.usage.prompt_tokens;
    cached_tokens += prompt.usage.cached_prompt_tokens;
    completion_tokens += prompt.completion_tokens;
    for (uint32_t s = 0; s < request_.n; ++s) {
      const size_t index = p * request_.n + s;
      const Choice& c = choices_[index];
      json logprobs = nullptr;
      if (request_.num_top_logprobs) {
        const uint32_t top = *request_.num_top_logprobs;
        logprobs = is_chat ? ChatLogprobs(c.token_ids, c.logprobs, top)
                           : CompletionLogprobs(request_.echo ? &prompt.prompt_logprobs : nullptr, c.token_ids,
                                                c.logprobs, top);
      }
      choices.push_back(ChoiceJson(request_, index, prompt.echo_text + c.text, logprobs, c.finish_reason, false, false));
    }
  }
  json body = {{"id", id_},
               {"object", is_chat ? "chat.completion" : "text_completion"},
               {"created", created_},
               {"model", model_},
               {"choices", std::move(choices)},
               {"usage", UsageObject(prompt_tokens, completion_tokens, cached_tokens)},
               {"seed", prompts_.empty() ? 0 : prompts_[0].seed},
               {"replays", NumReplays()}};
  return Dump(body);
}

uint32_t ResponseAssembler::NumReplays() const {
  uint32_t n = 0;
  for (const Prompt& prompt : prompts_) n = std::max(n, prompt.num_replays);
  return n;
}

std::string ResponseAssembler::Tail() const {
  if (!request_.include_usage) return "";
  uint32_t prompt_tokens = 0, completion_tokens = 0, cached_tokens = 0;
  for (const Prompt& prompt : prompts_) {
    prompt_tokens += prompt.usage.prompt_tokens;
    cached_tokens += prompt.usage.cached_prompt_tokens;
    completion_tokens += prompt.completion_tokens;
  }
  const bool is_chat = request_.endpoint == Endpoint::kChatCompletions;
  json payload = {{"id", id_}, {"object", is_chat ? "chat.completion.chunk" : "text_completion"},
                  {"created", created_}, {"model", model_}, {"choices", json::array()},
                  {"usage", UsageObject(prompt_tokens, completion_tokens, cached_tokens)},
                  {"seed", prompts_.empty() ? 0 : prompts_[0].seed},
                  {"replays", NumReplays()}};
  return Dump(payload);
}

}  // namespace tpserve::http
