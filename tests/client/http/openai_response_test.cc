#include "client/http/openai_response.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace tpserve::http {
namespace {

using nlohmann::json;

proto::ServerMessage Chunk(uint32_t sample, std::vector<int32_t> ids, std::string text,
                           std::vector<proto::TokenLogprobs> logprobs = {}) {
  proto::ServerMessage m;
  m.kind = proto::ServerMessageKind::kChunk;
  m.chunk.sample_index = sample;
  m.chunk.token_ids = std::move(ids);
  m.chunk.text = std::move(text);
  m.chunk.logprobs = std::move(logprobs);
  return m;
}

proto::ServerMessage Finish(uint32_t sample, proto::FinishReason reason, uint32_t prompt_tokens,
                            uint32_t completion_tokens, uint32_t cached, uint64_t seed) {
  proto::ServerMessage m;
  m.kind = proto::ServerMessageKind::kFinish;
  m.finish.sample_index = sample;
  m.finish.reason = reason;
  m.finish.usage = {prompt_tokens, completion_tokens, cached};
  m.finish.seed = seed;
  return m;
}

OpenAiRequest Request(Endpoint endpoint, size_t num_prompts, uint32_t n) {
  OpenAiRequest r;
  r.endpoint = endpoint;
  r.n = n;
  r.prompts.resize(num_prompts);
  return r;
}

TEST(ResponseAssembler, BatchWithNIsIndexedPromptTimesNPlusSample) {
  const OpenAiRequest r = Request(Endpoint::kCompletions, 2, 2);
  ResponseAssembler a(r, "cmpl-x", "m", 100);
  EXPECT_TRUE(a.OnMessage(1, Chunk(1, {7}, "p1s1")).empty());  // not streamed: nothing to send yet
  a.OnMessage(0, Chunk(0, {5}, "p0s0"));
  a.OnMessage(0, Chunk(1, {6}, "p0s1"));
  a.OnMessage(1, Chunk(0, {8}, "p1s0"));
  a.OnMessage(0, Finish(0, proto::FinishReason::kStop, 4, 1, 2, 77));
  a.OnMessage(0, Finish(1, proto::FinishReason::kLength, 4, 1, 2, 77));
  a.OnMessage(1, Finish(1, proto::FinishReason::kLength, 3, 1, 0, 78));
  EXPECT_FALSE(a.is_done());
  a.OnMessage(1, Finish(0, proto::FinishReason::kStop, 3, 1, 0, 78));
  ASSERT_TRUE(a.is_done());
  const json body = json::parse(a.Body());
  EXPECT_EQ(body["id"], "cmpl-x");
  EXPECT_EQ(body["object"], "text_completion");
  ASSERT_EQ(body["choices"].size(), 4u);
  const char* texts[] = {"p0s0", "p0s1", "p1s0", "p1s1"};
  const char* reasons[] = {"stop", "length", "stop", "length"};
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(body["choices"][i]["index"], i);
    EXPECT_EQ(body["choices"][i]["text"], texts[i]);
    EXPECT_EQ(body["choices"][i]["finish_reason"], reasons[i]);
  }
  // Prompt tokens once per prompt; completion tokens per sample; cached tokens per prompt.
  EXPECT_EQ(body["usage"]["prompt_tokens"], 7);
  EXPECT_EQ(body["usage"]["completion_tokens"], 4);
  EXPECT_EQ(body["usage"]["total_tokens"], 11);
  EXPECT_EQ(body["usage"]["prompt_tokens_details"]["cached_tokens"], 2);
  EXPECT_EQ(body["seed"], 77);
}

TEST(ResponseAssembler, StreamedChatSendsRoleFirstThenFinishAndUsage) {
  OpenAiRequest r = Request(Endpoint::kChatCompletions, 1, 1);
  r.stream = true;
  r.include_usage = true;
  ResponseAssembler a(r, "chatcmpl-y", "m", 5);
  std::vector<std::string> first = a.OnMessage(0, Chunk(0, {1}, "Hel"));
  ASSERT_EQ(first.size(), 1u);
  json event = json::parse(first[0]);
  EXPECT_EQ(event["object"], "chat.completion.chunk");
  EXPECT_EQ(event["choices"][0]["delta"]["role"], "assistant");
  EXPECT_EQ(event["choices"][0]["delta"]["content"], "Hel");
  EXPECT_TRUE(event["choices"][0]["finish_reason"].is_null());
  event = json::parse(a.OnMessage(0, Chunk(0, {2}, "lo")).at(0));
  EXPECT_FALSE(event["choices"][0]["delta"].contains("role"));
  event = json::parse(a.OnMessage(0, Finish(0, proto::FinishReason::kStop, 9, 2, 0, 3)).at(0));
  EXPECT_EQ(event["choices"][0]["finish_reason"], "stop");
  ASSERT_TRUE(a.is_done());
  const json tail = json::parse(a.Tail());
  EXPECT_TRUE(tail["choices"].empty());
  EXPECT_EQ(tail["usage"]["total_tokens"], 11);
  EXPECT_EQ(SseEvent("{}"), "data: {}\n\n");
}

TEST(ResponseAssembler, EchoPrependsThePromptAndItsLogprobs) {
  OpenAiRequest r = Request(Endpoint::kCompletions, 1, 1);
  r.echo = true;
  r.num_top_logprobs = 1;
  r.prompts[0].prompt_kind = proto::PromptKind::kText;
  r.prompts[0].prompt_text = "Hi there";
  ResponseAssembler a(r, "cmpl-z", "m", 5);
  proto::ServerMessage prompt;
  prompt.kind = proto::ServerMessageKind::kPromptLogprobs;
  prompt.prompt_logprobs.token_ids = {10, 11};
  prompt.prompt_logprobs.logprobs = {{-1.5f, {{11, -1.5f}}}};
  a.OnMessage(0, prompt);
  EXPECT_TRUE(a.has_prompt_logprobs());
  a.OnMessage(0, Chunk(0, {12}, "!", {{-0.25f, {{12, -0.25f}, {13, -2.0f}}}}));
  a.OnMessage(0, Finish(0, proto::FinishReason::kLength, 2, 1, 0, 1));
  const json choice = json::parse(a.Body())["choices"][0];
  EXPECT_EQ(choice["text"], "Hi there!");
  EXPECT_EQ(choice["logprobs"]["tokens"], json({"token_id:10", "token_id:11", "token_id:12"}));
  EXPECT_TRUE(choice["logprobs"]["token_logprobs"][0].is_null());
  EXPECT_EQ(choice["logprobs"]["token_logprobs"][1], -1.5);
  EXPECT_EQ(choice["logprobs"]["token_logprobs"][2], -0.25);
  EXPECT_EQ(choice["logprobs"]["top_logprobs"][2], json({{"token_id:12", -0.25}}));  // trimmed to 1
}

TEST(ResponseAssembler, DiscardedOutputReportsOnlyThePrompt) {
  OpenAiRequest r = Request(Endpoint::kCompletions, 1, 1);
  r.echo = true;
  r.discard_output = true;
  r.prompts[0].prompt_kind = proto::PromptKind::kTokenIds;
  ResponseAssembler a(r, "cmpl-w", "m", 5);
  a.SetEchoText(0, "decoded prompt");
  a.OnMessage(0, Chunk(0, {3}, " extra"));
  a.OnMessage(0, Finish(0, proto::FinishReason::kLength, 2, 1, 0, 1));
  const json body = json::parse(a.Body());
  EXPECT_EQ(body["choices"][0]["text"], "decoded prompt");
  EXPECT_EQ(body["usage"]["completion_tokens"], 0);
}

}  // namespace
}  // namespace tpserve::http
