// POST /v1/completions as the load generator speaks it: the request body, and the token count of
// streams built as tpserve's gateway and llama-server send them (one chunk per token, a chunk with
// empty text for a token held back inside a UTF-8 character, the usage chunk, [DONE]), fed through
// the SSE parser split at every byte.
#include "bench/loadgen/openai_completion.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "bench/loadgen/sse_parser.h"
#include "common/json.h"

namespace tpserve::loadgen {
namespace {

TEST(OpenAiCompletionTest, RequestBody) {
  BenchRequest r;
  r.prompt_ids = {40, 41, 49151};
  r.output_len = 7;
  auto body = ParseJson(OpenAiCompletionRequestJson(r, "smol"));
  ASSERT_TRUE(body.ok());
  EXPECT_EQ(*body->GetString("model"), "smol");
  const JsonValue* prompt = body->Find("prompt");
  ASSERT_NE(prompt, nullptr);
  ASSERT_EQ(prompt->size(), 3u);
  EXPECT_EQ((*prompt)[0].int_value(), 40);
  EXPECT_EQ((*prompt)[2].int_value(), 49151);
  EXPECT_EQ(*body->GetInt("max_tokens"), 7);
  EXPECT_TRUE(*body->GetBool("ignore_eos"));
  EXPECT_TRUE(*body->GetBool("stream"));
  EXPECT_EQ(*body->GetNumber("temperature"), 0.0);
  const JsonValue* options = body->Find("stream_options");
  ASSERT_NE(options, nullptr);
  EXPECT_TRUE(*options->GetBool("include_usage"));
}

// The events of `stream` parsed after feeding it to an SseParser one byte at a time.
std::vector<OpenAiCompletionEvent> ParseStream(const std::string& stream) {
  SseParser sse;
  std::vector<SseEvent> events;
  for (char c : stream) EXPECT_TRUE(sse.Feed(std::string(1, c), &events).ok());
  std::vector<OpenAiCompletionEvent> out;
  for (const SseEvent& e : events) {
    auto parsed = ParseOpenAiCompletionEvent(e.data);
    EXPECT_TRUE(parsed.ok()) << parsed.status().ToString();
    if (parsed.ok()) out.push_back(*parsed);
  }
  return out;
}

TEST(OpenAiCompletionTest, CountsChunksWithTextAndTakesTheUsage) {
  // 5 tokens; the 3rd ends inside a UTF-8 character: its chunk has empty text and the 4th carries
  // "é". 4 chunks count; the usage chunk says 5 and 2 cached prompt tokens.
  const std::string stream =
      "data: {\"id\":\"cmpl-1\",\"object\":\"text_completion\",\"model\":\"m\",\"choices\":[{\"index\":0,\"text\":\"He\","
      "\"logprobs\":null,\"finish_reason\":null}]}\n\n"
      "data: {\"id\":\"cmpl-1\",\"choices\":[{\"index\":0,\"text\":\"llo\",\"finish_reason\":null}]}\n\n"
      "data: {\"id\":\"cmpl-1\",\"choices\":[{\"index\":0,\"text\":\"\",\"finish_reason\":null}]}\n\n"
      "data: {\"id\":\"cmpl-1\",\"choices\":[{\"index\":0,\"text\":\"\xC3\xA9\",\"finish_reason\":null}]}\n\n"
      ": keep-alive\n\n"
      "data: {\"id\":\"cmpl-1\",\"choices\":[{\"index\":0,\"text\":\"!\",\"finish_reason\":\"length\"}]}\n\n"
      "data: {\"id\":\"cmpl-1\",\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":5,"
      "\"total_tokens\":8,\"prompt_tokens_details\":{\"cached_tokens\":2}}}\n\n"
      "data: [DONE]\n\n";
  const std::vector<OpenAiCompletionEvent> events = ParseStream(stream);
  ASSERT_EQ(events.size(), 7u);
  std::vector<int64_t> counted;
  for (const auto& e : events) counted.push_back(e.num_tokens);
  EXPECT_EQ(counted, (std::vector<int64_t>{1, 1, 0, 1, 1, 0, 0}));
  EXPECT_EQ(events[4].completion_tokens, -1);
  EXPECT_EQ(events[5].completion_tokens, 5);
  EXPECT_EQ(events[5].cached_prompt_tokens, 2);
  EXPECT_FALSE(events[5].is_done);
  EXPECT_TRUE(events[6].is_done);
}

TEST(OpenAiCompletionTest, UsageWithoutDetailsErrorsAndGarbage) {
  // llama-server may leave out prompt_tokens_details: 0 cached.
  auto usage = ParseOpenAiCompletionEvent(R"({"choices":[],"usage":{"completion_tokens":9,"prompt_tokens":4}})");
  ASSERT_TRUE(usage.ok());
  EXPECT_EQ(usage->completion_tokens, 9);
  EXPECT_EQ(usage->cached_prompt_tokens, 0);
  EXPECT_EQ(usage->num_tokens, 0);

  auto error = ParseOpenAiCompletionEvent(R"({"error":{"message":"the context is full","type":"server_error","code":500}})");
  ASSERT_TRUE(error.ok());
  EXPECT_EQ(error->error, "the context is full");
  EXPECT_FALSE(ParseOpenAiCompletionEvent("[DONE ]").ok());
  EXPECT_FALSE(ParseOpenAiCompletionEvent(R"({"choices":[{"text":"cut)").ok());
  EXPECT_FALSE(ParseOpenAiCompletionEvent("[1]").ok());
}

}  // namespace
}  // namespace tpserve::loadgen
