// llama-server's /completion protocol as the load generator speaks it: the request body, and the
// token count of a stream built as llama-server sends it (one partial per token, a token ending
// inside a UTF-8 character held back into the next event, a final event with the totals).
#include "bench/loadgen/llama_completion.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/json.h"

namespace tpserve::loadgen {
namespace {

TEST(LlamaCompletionTest, RequestBody) {
  BenchRequest r;
  r.prompt_ids = {40, 41, 49151};
  r.output_len = 7;
  auto body = ParseJson(LlamaCompletionRequestJson(r));
  ASSERT_TRUE(body.ok());
  const JsonValue* prompt = body->Find("prompt");
  ASSERT_NE(prompt, nullptr);
  ASSERT_EQ(prompt->size(), 3u);
  EXPECT_EQ((*prompt)[2].int_value(), 49151);
  EXPECT_EQ(*body->GetInt("n_predict"), 7);
  EXPECT_TRUE(*body->GetBool("ignore_eos"));
  EXPECT_TRUE(*body->GetBool("stream"));
  EXPECT_EQ(*body->GetNumber("temperature"), 0.0);
}

TEST(LlamaCompletionTest, CountsTheServersTokens) {
  // 5 tokens; the 3rd ends inside a UTF-8 character, so its text goes out with the 4th: 4 partials.
  const std::vector<std::string> stream = {
      R"({"index":0,"content":"He","tokens":[100],"stop":false,"id_slot":0,"tokens_predicted":1,"tokens_evaluated":3})",
      R"({"index":0,"content":"llo","tokens":[101],"stop":false,"id_slot":0,"tokens_predicted":2,"tokens_evaluated":3})",
      R"({"index":0,"content":"é","tokens":[103],"stop":false,"id_slot":0,"tokens_predicted":4,"tokens_evaluated":3})",
      R"({"index":0,"content":"!","tokens":[104],"stop":false,"id_slot":0,"tokens_predicted":5,"tokens_evaluated":3,
          "timings":{"cache_n":0,"prompt_n":3,"predicted_n":5}})",
      R"({"index":0,"content":"","tokens":[],"id_slot":0,"stop":true,"model":"m","tokens_predicted":5,"tokens_evaluated":3,
          "stop_type":"limit","timings":{"cache_n":2,"prompt_n":1,"predicted_n":5}})"};
  std::vector<int64_t> added;
  int64_t counted = 0;
  LlamaCompletionEvent last;
  for (const std::string& data : stream) {
    auto e = ParseLlamaCompletionEvent(data);
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    added.push_back(NewTokens(*e, counted));
    counted += added.back();
    last = *e;
  }
  EXPECT_EQ(added, (std::vector<int64_t>{1, 1, 2, 1, 0}));
  EXPECT_TRUE(last.is_stop);
  EXPECT_EQ(last.tokens_predicted, 5);
  EXPECT_EQ(last.cached_prompt_tokens, 2);
}

TEST(LlamaCompletionTest, WithoutCountsErrorsAndGarbage) {
  // No tokens_predicted: the listed ids count, or 1 for text alone; timings.predicted_n stands in.
  auto listed = ParseLlamaCompletionEvent(R"({"tokens":[1,2],"content":"ab"})");
  ASSERT_TRUE(listed.ok());
  EXPECT_EQ(NewTokens(*listed, 10), 2);
  auto text = ParseLlamaCompletionEvent(R"({"content":"a"})");
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(NewTokens(*text, 0), 1);
  auto timed = ParseLlamaCompletionEvent(R"({"stop":true,"content":"","timings":{"predicted_n":9}})");
  ASSERT_TRUE(timed.ok());
  EXPECT_EQ(timed->tokens_predicted, 9);
  EXPECT_EQ(NewTokens(*timed, 9), 0);
  EXPECT_EQ(NewTokens(*timed, 12), 0);  // never negative

  auto error = ParseLlamaCompletionEvent(R"({"error":{"code":500,"message":"the context is full","type":"server_error"}})");
  ASSERT_TRUE(error.ok());
  EXPECT_EQ(error->error, "the context is full");
  EXPECT_FALSE(ParseLlamaCompletionEvent("[DONE]").ok());
  EXPECT_FALSE(ParseLlamaCompletionEvent(R"({"content":"cut)").ok());
  EXPECT_FALSE(ParseLlamaCompletionEvent("[1]").ok());
}

}  // namespace
}  // namespace tpserve::loadgen
