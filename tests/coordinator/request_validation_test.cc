#include "coordinator/request_validation.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>

namespace tpserve {
namespace {

const ModelLimits kLimits{100, 64};

proto::GenerateRequest Valid() {
  proto::GenerateRequest r;
  r.prompt_kind = proto::PromptKind::kTokenIds;
  r.prompt_ids = {1, 2, 3};
  r.max_tokens = 4;
  return r;
}

TEST(RequestValidationTest, ValidRequestPasses) {
  EXPECT_TRUE(ValidateGenerateRequest(Valid(), kLimits).ok());
  proto::GenerateRequest r = Valid();
  r.sampling.temperature = 0.7f;
  r.sampling.top_k = 100;
  r.sampling.top_p = 1.0f;
  r.sampling.min_p = 1.0f;
  r.sampling.logit_bias = {{99, -100.0f}};
  r.sampling.num_logprobs = 20;
  r.n = 16;
  r.stop_token_ids = {0, 99};
  EXPECT_TRUE(ValidateGenerateRequest(r, kLimits).ok());
}

// Each row breaks one field; every one must be INVALID_ARGUMENT naming that field.
TEST(RequestValidationTest, EachBadFieldIsInvalidArgumentNamingIt) {
  struct Case {
    const char* field;
    std::function<void(proto::GenerateRequest&)> breaks;
  };
  const Case cases[] = {
      {"temperature", [](auto& r) { r.sampling.temperature = -0.1f; }},
      {"temperature", [](auto& r) { r.sampling.temperature = std::nanf(""); }},
      {"temperature", [](auto& r) { r.sampling.temperature = 1000.0f; }},
      {"top_k", [](auto& r) { r.sampling.top_k = -1; }},
      {"top_k", [](auto& r) { r.sampling.top_k = 101; }},
      {"top_p", [](auto& r) { r.sampling.top_p = 0.0f; }},
      {"top_p", [](auto& r) { r.sampling.top_p = 1.5f; }},
      {"min_p", [](auto& r) { r.sampling.min_p = -0.5f; }},
      {"repetition_penalty", [](auto& r) { r.sampling.repetition_penalty = 0.0f; }},
      {"presence_penalty", [](auto& r) { r.sampling.presence_penalty = 3.0f; }},
      {"frequency_penalty", [](auto& r) { r.sampling.frequency_penalty = -3.0f; }},
      {"logit_bias", [](auto& r) { r.sampling.logit_bias = {{100, 1.0f}}; }},
      {"logit_bias value", [](auto& r) { r.sampling.logit_bias = {{5, std::nanf("")}}; }},
      {"num_logprobs", [](auto& r) { r.sampling.num_logprobs = 21; }},
      {"max_tokens", [](auto& r) { r.max_tokens = 0; }},
      {"n =", [](auto& r) { r.n = 0; }},
      {"n =", [](auto& r) { r.n = 17; }},
      {"stop_token_ids", [](auto& r) { r.stop_token_ids = {-1}; }},
      {"prompt", [](auto& r) { r.prompt_ids = {1, 100}; }},
      {"prompt is empty", [](auto& r) { r.prompt_ids.clear(); }},
      {"prompt is empty", [](auto& r) {
         r.prompt_kind = proto::PromptKind::kText;
         r.prompt_text.clear();
       }},
      {"chat has no messages", [](auto& r) { r.prompt_kind = proto::PromptKind::kChat; }},
      {"chat role", [](auto& r) {
         r.prompt_kind = proto::PromptKind::kChat;
         r.chat = {{"root", "hi"}};
       }},
  };
  for (const Case& c : cases) {
    proto::GenerateRequest r = Valid();
    c.breaks(r);
    Status s = ValidateGenerateRequest(r, kLimits);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << c.field;
    EXPECT_NE(s.message().find(c.field), std::string::npos) << c.field << ": " << s.message();
  }
}

TEST(RequestValidationTest, PromptLengthAgainstContext) {
  EXPECT_TRUE(ValidatePromptLength(std::vector<int32_t>(63, 1), kLimits).ok());
  EXPECT_EQ(ValidatePromptLength(std::vector<int32_t>(64, 1), kLimits).code(), StatusCode::kOutOfRange);
  EXPECT_EQ(ValidatePromptLength({}, kLimits).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tpserve
