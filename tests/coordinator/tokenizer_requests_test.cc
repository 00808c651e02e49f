#include "coordinator/tokenizer_requests.h"

#include <gtest/gtest.h>

#include "model/chat_format.h"
#include "model/gguf_file.h"

namespace tpserve {
namespace {

constexpr const char* kModel = "models/SmolLM2-135M-Instruct.Q4_1.gguf";

class TokenizerRequestsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto file = GgufFile::Open(kModel);
    if (!file.ok()) GTEST_SKIP() << "no " << kModel;
    auto tokenizer = Tokenizer::FromGguf(**file);
    ASSERT_TRUE(tokenizer.ok()) << tokenizer.status().ToString();
    tokenizer_ = std::move(*tokenizer);
    builder_ = std::make_unique<PromptBuilder>(tokenizer_.get());
    limits_ = {tokenizer_->vocab_size(), 8192};
  }

  proto::ServerMessage Answer(const proto::ClientMessage& m, const Tokenizer* tokenizer = nullptr) {
    return AnswerTokenizerRequest(m, *builder_, tokenizer ? tokenizer : tokenizer_.get(), limits_);
  }

  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<PromptBuilder> builder_;
  ModelLimits limits_;
};

proto::ClientMessage TokenizeText(const std::string& text, bool add_special) {
  proto::ClientMessage m;
  m.request_id = 42;
  m.kind = proto::ClientMessageKind::kTokenize;
  m.tokenize.prompt_kind = proto::PromptKind::kText;
  m.tokenize.prompt_text = text;
  m.tokenize.add_special_tokens = add_special;
  return m;
}

TEST_F(TokenizerRequestsTest, TextIsTokenizedAsAGenerateRequestWouldBe) {
  const std::string text = "Hello, world! <|im_start|> stays text";
  proto::ServerMessage reply = Answer(TokenizeText(text, true));
  ASSERT_EQ(reply.kind, proto::ServerMessageKind::kTokenize) << reply.error.message;
  EXPECT_EQ(reply.request_id, 42u);
  EXPECT_EQ(reply.tokenize.token_ids, tokenizer_->Encode(text, tokenizer_->add_bos(), /*parse_special=*/false));
  EXPECT_EQ(reply.tokenize.max_model_len, 8192u);
  reply = Answer(TokenizeText(text, false));
  EXPECT_EQ(reply.tokenize.token_ids, tokenizer_->Encode(text, false, false));
}

TEST_F(TokenizerRequestsTest, ChatIsRenderedInTheModelsFormat) {
  proto::ClientMessage m;
  m.kind = proto::ClientMessageKind::kTokenize;
  m.tokenize.prompt_kind = proto::PromptKind::kChat;
  m.tokenize.chat = {{"user", "Hi"}};
  const proto::ServerMessage reply = Answer(m);
  ASSERT_EQ(reply.kind, proto::ServerMessageKind::kTokenize) << reply.error.message;
  const std::string decoded = tokenizer_->Decode(reply.tokenize.token_ids);
  EXPECT_NE(decoded.find("<|im_start|>user\nHi<|im_end|>"), std::string::npos) << decoded;
  EXPECT_EQ(decoded.substr(decoded.size() - std::string("<|im_start|>assistant\n").size()), "<|im_start|>assistant\n");
  m.tokenize.chat = {{"tool", "x"}};
  EXPECT_EQ(Answer(m).error.kind, proto::ErrorKind::kInvalidRequest);
}

TEST_F(TokenizerRequestsTest, DetokenizeRoundTripsAndChecksIds) {
  const std::string text = "Ünïcödé round trip";
  proto::ClientMessage m;
  m.request_id = 7;
  m.kind = proto::ClientMessageKind::kDetokenize;
  m.detokenize.token_ids = tokenizer_->Encode(text, false, false);
  proto::ServerMessage reply = Answer(m);
  ASSERT_EQ(reply.kind, proto::ServerMessageKind::kDetokenize) << reply.error.message;
  EXPECT_EQ(reply.detokenize.text, text);
  m.detokenize.token_ids.push_back(limits_.vocab_size);
  reply = Answer(m);
  ASSERT_EQ(reply.kind, proto::ServerMessageKind::kError);
  EXPECT_EQ(reply.error.kind, proto::ErrorKind::kInvalidRequest);
  EXPECT_EQ(reply.request_id, 7u);
  EXPECT_NE(reply.error.message.find(std::to_string(limits_.vocab_size)), std::string::npos);
}

TEST(TokenizerRequests, WithoutATokenizerTheAnswerIsAnError) {
  PromptBuilder builder(nullptr);
  const proto::ServerMessage reply = AnswerTokenizerRequest(TokenizeText("x", true), builder, nullptr, {100, 64});
  ASSERT_EQ(reply.kind, proto::ServerMessageKind::kError);
  EXPECT_EQ(reply.error.kind, proto::ErrorKind::kInvalidRequest);
}

}  // namespace
}  // namespace tpserve
