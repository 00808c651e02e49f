#include "client/http/openai_request.h"

#include <gtest/gtest.h>

namespace tpserve::http {
namespace {

OpenAiRequest Parse(Endpoint endpoint, const std::string& body) {
  ParsedRequest parsed = ParseOpenAiRequest(endpoint, body);
  if (auto* error = std::get_if<ApiError>(&parsed)) {
    ADD_FAILURE() << error->ToJson();
    return {};
  }
  return std::get<OpenAiRequest>(parsed);
}

ApiError ParseError(Endpoint endpoint, const std::string& body) {
  ParsedRequest parsed = ParseOpenAiRequest(endpoint, body);
  if (auto* error = std::get_if<ApiError>(&parsed)) return *error;
  ADD_FAILURE() << "accepted: " << body;
  return {};
}

TEST(OpenAiRequest, CompletionFieldsMapToTheGenerateRequest) {
  const OpenAiRequest r = Parse(Endpoint::kCompletions, R"({
    "model": "m", "prompt": "Hello", "max_tokens": 7, "temperature": 0.5, "top_p": 0.9, "top_k": 40,
    "min_p": 0.05, "presence_penalty": 0.5, "frequency_penalty": -0.5, "repetition_penalty": 1.1,
    "logit_bias": {"42": -100, "7": 2.5}, "seed": 1234, "stop": ["\n", "END"], "n": 3, "logprobs": 2,
    "user": "u1", "ignore_eos": true, "stream": true, "stream_options": {"include_usage": true}})");
  EXPECT_EQ(r.model, "m");
  ASSERT_EQ(r.prompts.size(), 1u);
  const proto::GenerateRequest& g = r.prompts[0];
  EXPECT_EQ(g.prompt_kind, proto::PromptKind::kText);
  EXPECT_EQ(g.prompt_text, "Hello");
  EXPECT_EQ(g.max_tokens, 7u);
  EXPECT_FLOAT_EQ(g.sampling.temperature, 0.5f);
  EXPECT_FLOAT_EQ(g.sampling.top_p, 0.9f);
  EXPECT_EQ(g.sampling.top_k, 40);
  EXPECT_FLOAT_EQ(g.sampling.min_p, 0.05f);
  EXPECT_FLOAT_EQ(g.sampling.presence_penalty, 0.5f);
  EXPECT_FLOAT_EQ(g.sampling.frequency_penalty, -0.5f);
  EXPECT_FLOAT_EQ(g.sampling.repetition_penalty, 1.1f);
  const std::vector<std::pair<int32_t, float>> bias = {{42, -100.0f}, {7, 2.5f}};
  EXPECT_EQ(g.sampling.logit_bias, bias);
  EXPECT_TRUE(g.sampling.has_seed);
  EXPECT_EQ(g.sampling.seed, 1234u);
  EXPECT_EQ(g.stop, (std::vector<std::string>{"\n", "END"}));
  EXPECT_EQ(g.n, 3u);
  EXPECT_EQ(r.n, 3u);
  EXPECT_EQ(g.sampling.num_logprobs, 2);
  EXPECT_EQ(r.num_top_logprobs, 2u);
  EXPECT_EQ(g.user, "u1");
  EXPECT_TRUE(g.ignore_eos);
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
  EXPECT_TRUE(g.stream);  // the gateway always streams from the coordinator
  EXPECT_FALSE(g.prompt_logprobs);
}

TEST(OpenAiRequest, DefaultsAreOpenAis) {
  const OpenAiRequest r = Parse(Endpoint::kCompletions, R"({"prompt": "x"})");
  const proto::GenerateRequest& g = r.prompts[0];
  EXPECT_EQ(g.max_tokens, kDefaultCompletionMaxTokens);
  EXPECT_FLOAT_EQ(g.sampling.temperature, 1.0f);  // OpenAI samples by default
  EXPECT_FALSE(g.sampling.has_seed);
  EXPECT_EQ(g.sampling.num_logprobs, 0);
  EXPECT_FALSE(r.num_top_logprobs.has_value());
  EXPECT_FALSE(r.stream);
  // Chat without max_tokens: the caller sets the context left after the prompt.
  EXPECT_FALSE(Parse(Endpoint::kChatCompletions, R"({"messages": [{"role": "user", "content": "hi"}]})").has_max_tokens);
  EXPECT_TRUE(Parse(Endpoint::kChatCompletions, R"({"messages": [{"role": "user", "content": "hi"}],
                                                    "max_completion_tokens": 5})").has_max_tokens);
}

TEST(OpenAiRequest, PromptShapesAndBatches) {
  OpenAiRequest r = Parse(Endpoint::kCompletions, R"({"prompt": [1, 2, 3]})");
  ASSERT_EQ(r.prompts.size(), 1u);
  EXPECT_EQ(r.prompts[0].prompt_kind, proto::PromptKind::kTokenIds);
  EXPECT_EQ(r.prompts[0].prompt_ids, (std::vector<int32_t>{1, 2, 3}));

  r = Parse(Endpoint::kCompletions, R"({"prompt": ["a", [5, 6], "b"], "seed": 9, "temperature": 0})");
  ASSERT_EQ(r.prompts.size(), 3u);
  EXPECT_EQ(r.prompts[0].prompt_text, "a");
  EXPECT_EQ(r.prompts[1].prompt_ids, (std::vector<int32_t>{5, 6}));
  EXPECT_EQ(r.prompts[2].prompt_text, "b");
  for (const proto::GenerateRequest& g : r.prompts) {  // the shared fields reach every prompt
    EXPECT_EQ(g.sampling.seed, 9u);
    EXPECT_FLOAT_EQ(g.sampling.temperature, 0.0f);
  }
}

TEST(OpenAiRequest, ChatMessagesAndLogprobs) {
  const OpenAiRequest r = Parse(Endpoint::kChatCompletions, R"({"messages": [
      {"role": "system", "content": "be brief"},
      {"role": "user", "content": [{"type": "text", "text": "hi "}, {"type": "text", "text": "there"}]}],
      "logprobs": true, "top_logprobs": 4, "max_tokens": 3})");
  ASSERT_EQ(r.prompts.size(), 1u);
  const proto::GenerateRequest& g = r.prompts[0];
  EXPECT_EQ(g.prompt_kind, proto::PromptKind::kChat);
  ASSERT_EQ(g.chat.size(), 2u);
  EXPECT_EQ(g.chat[0].role, "system");
  EXPECT_EQ(g.chat[1].content, "hi there");
  EXPECT_EQ(r.num_top_logprobs, 4u);
  EXPECT_EQ(g.sampling.num_logprobs, 4);
  // logprobs: true with top_logprobs 0 still asks the coordinator for the chosen tokens' logprobs.
  const OpenAiRequest zero = Parse(Endpoint::kChatCompletions,
                                   R"({"messages": [{"role": "user", "content": "x"}], "logprobs": true})");
  EXPECT_EQ(zero.num_top_logprobs, 0u);
  EXPECT_EQ(zero.prompts[0].sampling.num_logprobs, 1);
}

TEST(OpenAiRequest, EchoWithLogprobsAsksForPromptLogprobs) {
  const OpenAiRequest r = Parse(Endpoint::kCompletions, R"({"prompt": "x", "echo": true, "logprobs": 1, "max_tokens": 0})");
  EXPECT_TRUE(r.echo);
  EXPECT_TRUE(r.prompts[0].prompt_logprobs);
  EXPECT_TRUE(r.discard_output);  // max_tokens 0: one token generated, not reported
  EXPECT_EQ(r.prompts[0].max_tokens, 1u);
  EXPECT_FALSE(Parse(Endpoint::kCompletions, R"({"prompt": "x", "echo": true})").prompts[0].prompt_logprobs);
}

TEST(OpenAiRequest, ErrorsNameTheField) {
  struct Case {
    Endpoint endpoint;
    const char* body;
    const char* param;
  };
  const Case cases[] = {
      {Endpoint::kCompletions, R"({"prompt": "x", "temperature": "hot"})", "temperature"},
      {Endpoint::kCompletions, R"({"prompt": "x", "temperature": 3})", "temperature"},
      {Endpoint::kCompletions, R"({"prompt": "x", "top_p": 0})", "top_p"},
      {Endpoint::kCompletions, R"({"prompt": "x", "n": 0})", "n"},
      {Endpoint::kCompletions, R"({"prompt": "x", "max_tokens": -1})", "max_tokens"},
      {Endpoint::kCompletions, R"({"prompt": "x", "max_tokens": 0})", "max_tokens"},
      {Endpoint::kCompletions, R"({"prompt": "x", "logprobs": 21})", "logprobs"},
      {Endpoint::kCompletions, R"({"prompt": "x", "stop": [1]})", "stop"},
      {Endpoint::kCompletions, R"({"prompt": "x", "logit_bias": {"abc": 1}})", "logit_bias"},
      {Endpoint::kCompletions, R"({"prompt": "x", "logit_bias": {"5": 101}})", "logit_bias"},
      {Endpoint::kCompletions, R"({"prompt": "x", "seed": 1.5})", "seed"},
      {Endpoint::kCompletions, R"({"prompt": "x", "stream": "yes"})", "stream"},
      {Endpoint::kCompletions, R"({"prompt": ""})", "prompt"},
      {Endpoint::kCompletions, R"({"prompt": [1, -2]})", "prompt"},
      {Endpoint::kCompletions, R"({"prompt": ["a", 3]})", "prompt"},
      {Endpoint::kCompletions, R"({"prompt": {}})", "prompt"},
      {Endpoint::kCompletions, R"({"max_tokens": 3})", "prompt"},
      {Endpoint::kChatCompletions, R"({"messages": []})", "messages"},
      {Endpoint::kChatCompletions, R"({"messages": [{"role": "tool", "content": "x"}]})", "messages[0].role"},
      {Endpoint::kChatCompletions, R"({"messages": [{"role": "user"}]})", "messages[0].content"},
      {Endpoint::kChatCompletions, R"({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]})",
       "messages[0].content"},
      {Endpoint::kChatCompletions, R"({"messages": [{"role": "user", "content": "x"}], "top_logprobs": 2})",
       "top_logprobs"},
      {Endpoint::kCompletions, R"({"prompt": "x", "use_beam_search": true, "n": 3, "best_of": 2})", "best_of"},
      {Endpoint::kCompletions, R"({"prompt": "x", "use_beam_search": true, "best_of": 9})", "best_of"},
      {Endpoint::kCompletions, R"({"prompt": "x", "use_beam_search": true, "early_stopping": "soon"})",
       "early_stopping"},
      {Endpoint::kCompletions, R"({"prompt": "x", "use_beam_search": true, "length_penalty": 11})", "length_penalty"},
  };
  for (const Case& c : cases) {
    const ApiError e = ParseError(c.endpoint, c.body);
    EXPECT_EQ(e.status, 400u) << c.body;
    EXPECT_EQ(e.type, "invalid_request_error") << c.body;
    EXPECT_EQ(e.param, c.param) << c.body;
    EXPECT_NE(e.message.find(std::string(c.param).substr(0, 6)), std::string::npos) << c.body << " → " << e.message;
  }
}

TEST(OpenAiRequest, BeamSearchFieldsAreVllms) {
  const OpenAiRequest r = Parse(Endpoint::kCompletions, R"({"prompt": "x", "use_beam_search": true, "n": 2,
    "best_of": 4, "length_penalty": 0.5, "early_stopping": "never"})");
  ASSERT_EQ(r.prompts.size(), 1u);
  const proto::GenerateRequest& g = r.prompts[0];
  EXPECT_EQ(g.beam.width, 4);
  EXPECT_EQ(g.n, 2u);
  EXPECT_FLOAT_EQ(g.beam.length_penalty, 0.5f);
  EXPECT_EQ(g.beam.early_stopping, EarlyStopping::kNever);
  EXPECT_EQ(g.sampling.temperature, 0.0f);  // OpenAI's default 1 does not apply to beam search

  const OpenAiRequest chat = Parse(Endpoint::kChatCompletions,
                                   R"({"messages": [{"role": "user", "content": "x"}], "use_beam_search": true,
                                       "n": 3, "early_stopping": true, "temperature": 0})");
  EXPECT_EQ(chat.prompts[0].beam.width, 3);  // best_of defaults to n
  EXPECT_EQ(chat.prompts[0].beam.early_stopping, EarlyStopping::kWhenFull);

  const OpenAiRequest plain = Parse(Endpoint::kCompletions, R"({"prompt": "x", "n": 2})");
  EXPECT_FALSE(plain.prompts[0].beam.enabled());
  EXPECT_FLOAT_EQ(plain.prompts[0].sampling.temperature, 1.0f);
}

TEST(OpenAiRequest, SpeculativeIsTpservesExtraField) {
  const OpenAiRequest draft =
      Parse(Endpoint::kCompletions, R"({"prompt": "x", "speculative": {"method": "draft", "k": 3}})");
  EXPECT_EQ(draft.prompts[0].speculative.method, proto::SpeculativeChoice::kDraft);
  EXPECT_EQ(draft.prompts[0].speculative.num_tokens, 3u);
  const OpenAiRequest ngram = Parse(Endpoint::kChatCompletions, R"({"messages": [{"role": "user", "content": "x"}],
                                    "speculative": {"method": "ngram", "num_speculative_tokens": 6}})");
  EXPECT_EQ(ngram.prompts[0].speculative.method, proto::SpeculativeChoice::kNgram);
  EXPECT_EQ(ngram.prompts[0].speculative.num_tokens, 6u);
  const OpenAiRequest absent = Parse(Endpoint::kCompletions, R"({"prompt": "x"})");
  EXPECT_EQ(absent.prompts[0].speculative.method, proto::SpeculativeChoice::kServerDefault);
  for (const char* body : {R"({"prompt": "x", "speculative": {"method": "eagle"}})",
                           R"({"prompt": "x", "speculative": {"method": "draft", "k": 0}})",
                           R"({"prompt": "x", "speculative": "draft"})"}) {
    EXPECT_EQ(ParseError(Endpoint::kCompletions, body).param, "speculative") << body;
  }
}

TEST(OpenAiRequest, MalformedBodiesAre400WithoutAParam) {
  for (const char* body : {"", "{", "[1, 2]", "\"text\"", "{\"prompt\": \"\xff\xfe\"}", "{\"prompt\": \"\\udc00\"}"}) {
    const ApiError e = ParseError(Endpoint::kCompletions, body);
    EXPECT_EQ(e.status, 400u) << body;
    EXPECT_TRUE(e.param.empty()) << body;
  }
}

TEST(OpenAiRequest, TokenizeAndDetokenizeBodies) {
  auto text = ParseTokenizeRequest(R"({"prompt": "hi", "add_special_tokens": false})");
  ASSERT_TRUE(std::holds_alternative<proto::TokenizeRequest>(text));
  EXPECT_EQ(std::get<proto::TokenizeRequest>(text).prompt_text, "hi");
  EXPECT_FALSE(std::get<proto::TokenizeRequest>(text).add_special_tokens);
  auto chat = ParseTokenizeRequest(R"({"messages": [{"role": "user", "content": "hi"}]})");
  ASSERT_TRUE(std::holds_alternative<proto::TokenizeRequest>(chat));
  EXPECT_EQ(std::get<proto::TokenizeRequest>(chat).prompt_kind, proto::PromptKind::kChat);
  EXPECT_TRUE(std::holds_alternative<ApiError>(ParseTokenizeRequest(R"({"prompt": 5})")));
  auto ids = ParseDetokenizeRequest(R"({"tokens": [3, 4]})");
  ASSERT_TRUE(std::holds_alternative<proto::DetokenizeRequest>(ids));
  EXPECT_EQ(std::get<proto::DetokenizeRequest>(ids).token_ids, (std::vector<int32_t>{3, 4}));
  EXPECT_EQ(std::get<ApiError>(ParseDetokenizeRequest(R"({"tokens": ["a"]})")).param, "tokens");
}

}  // namespace
}  // namespace tpserve::http
