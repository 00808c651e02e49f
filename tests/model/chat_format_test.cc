// Chat rendering of a 3-turn conversation against the published layouts (written out here) and
// against the templates themselves (SmolLM2's, Llama 2's, Llama 3's, Qwen 2.5's, Phi-3's, Gemma 3's)
// rendered by jinja2 (tests/data/tokenizer_golden_chat.txt).
#include "model/chat_format.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <map>

#include "tests/model/tokenizer_test_util.h"

namespace tpserve {
namespace {

const std::vector<ChatMessage> kWithSystem = {
    {"system", "You are terse."},
    {"user", "Hi! What is 2+2?"},
    {"assistant", "4."},
    {"user", "And 3+3?"},
};
const std::vector<ChatMessage> kNoSystem = {
    {"user", "Hello"},
    {"assistant", "Hi there, how can I help?"},
    {"user", "Tell me a joke.\nA short one."},
};
constexpr const char* kSmolLmDefaultSystem = "You are a helpful AI assistant named SmolLM, trained by Hugging Face";
// SmolLM2-135M-Instruct's tokenizer.chat_template.
constexpr const char* kSmolLmTemplate =
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\n"
    "You are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
    "' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";

// Qwen2.5-Instruct's template without its tool-call branches (as scripts/gen_tokenizer_golden.py renders it).
constexpr const char* kQwen25Template =
    "{%- if messages[0]['role'] == 'system' %}{{- '<|im_start|>system\\n' + messages[0]['content'] + "
    "'<|im_end|>\\n' }}{%- else %}{{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a "
    "helpful assistant.<|im_end|>\\n' }}{%- endif %}{%- for message in messages %}{%- if (message.role == \"user\") "
    "or (message.role == \"system\" and not loop.first) or (message.role == \"assistant\" and not "
    "message.tool_calls) %}{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}"
    "{%- endif %}{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}";

std::map<std::string, std::string> ReadChatGolden() {
  std::map<std::string, std::string> golden;
  std::ifstream in(testing_tokenizer::kChatGoldenPath);
  EXPECT_TRUE(in.good()) << testing_tokenizer::kChatGoldenPath;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    const size_t tab = line.find('\t');
    golden[line.substr(0, tab)] = testing_tokenizer::FromHex(line.substr(tab + 1));
  }
  return golden;
}

TEST(ChatFormatTest, ChatMLPublishedLayout) {
  EXPECT_EQ(RenderChat(ChatFormat::kChatML, kWithSystem, true),
            "<|im_start|>system\nYou are terse.<|im_end|>\n"
            "<|im_start|>user\nHi! What is 2+2?<|im_end|>\n"
            "<|im_start|>assistant\n4.<|im_end|>\n"
            "<|im_start|>user\nAnd 3+3?<|im_end|>\n"
            "<|im_start|>assistant\n");
  EXPECT_EQ(RenderChat(ChatFormat::kChatML, kNoSystem, false),
            "<|im_start|>user\nHello<|im_end|>\n"
            "<|im_start|>assistant\nHi there, how can I help?<|im_end|>\n"
            "<|im_start|>user\nTell me a joke.\nA short one.<|im_end|>\n");
}

TEST(ChatFormatTest, Llama2PublishedLayout) {
  EXPECT_EQ(RenderChat(ChatFormat::kLlama2, kWithSystem, true),
            "<s>[INST] <<SYS>>\nYou are terse.\n<</SYS>>\n\nHi! What is 2+2? [/INST] 4. </s>"
            "<s>[INST] And 3+3? [/INST]");
  EXPECT_EQ(RenderChat(ChatFormat::kLlama2, {{"user", "  padded  "}}, true), "<s>[INST] padded [/INST]");
}

TEST(ChatFormatTest, GemmaAndPhi3PublishedLayouts) {
  EXPECT_EQ(RenderChat(ChatFormat::kGemma, {{"system", "Be brief."}, {"user", " Hi \n"}}, true),
            "<bos><start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n<start_of_turn>model\n");
  EXPECT_EQ(RenderChat(ChatFormat::kPhi3, {{"user", "Hi"}, {"tool", "ignored"}}, true),
            "<|user|>\nHi<|end|>\n<|assistant|>\n");
}

TEST(ChatFormatTest, Llama3PublishedLayout) {
  EXPECT_EQ(RenderChat(ChatFormat::kLlama3, kWithSystem, true),
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nYou are terse.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHi! What is 2+2?<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n4.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nAnd 3+3?<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

TEST(ChatFormatTest, MatchesTemplatesRenderedByJinja2) {
  const auto golden = ReadChatGolden();
  ASSERT_EQ(golden.size(), 14u);
  const std::string qwen_system = DefaultSystemPrompt(kQwen25Template);
  EXPECT_EQ(qwen_system, "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.");
  const std::string system = DefaultSystemPrompt(kSmolLmTemplate);
  EXPECT_EQ(system, kSmolLmDefaultSystem);
  for (const auto& [suffix, messages] : {std::pair{"with_system", kWithSystem}, std::pair{"no_system", kNoSystem}}) {
    const std::string name = std::string(suffix) == "no_system" ? "default_system" : suffix;
    EXPECT_EQ(RenderChat(ChatFormat::kChatML, messages, true, system), golden.at("chatml_" + name)) << name;
    EXPECT_EQ(RenderChat(ChatFormat::kLlama2, messages, true), golden.at("llama2_" + name)) << name;
    EXPECT_EQ(RenderChat(ChatFormat::kLlama3, messages, true), golden.at("llama3_" + name)) << name;
    EXPECT_EQ(RenderChat(ChatFormat::kChatML, messages, true, qwen_system), golden.at("qwen25_" + name)) << name;
    EXPECT_EQ(RenderChat(ChatFormat::kPhi3, messages, true), golden.at("phi3_" + name)) << name;
    EXPECT_EQ(RenderChat(ChatFormat::kPhi3, messages, false), golden.at("phi3_" + name + "_closed")) << name;
    EXPECT_EQ(RenderChat(ChatFormat::kGemma, messages, true), golden.at("gemma3_" + name)) << name;
  }
}

TEST(ChatFormatTest, DetectAndEndOfTurn) {
  EXPECT_EQ(DetectChatFormat(kSmolLmTemplate), ChatFormat::kChatML);
  EXPECT_EQ(DetectChatFormat("{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}"), ChatFormat::kLlama2);
  EXPECT_EQ(DetectChatFormat("{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>' }}"),
            ChatFormat::kLlama3);
  EXPECT_EQ(DetectChatFormat(""), ChatFormat::kChatML);
  EXPECT_EQ(DetectChatFormat(kQwen25Template), ChatFormat::kChatML);
  EXPECT_EQ(DetectChatFormat("{{ '<start_of_turn>' + role + '\\n' }}"), ChatFormat::kGemma);
  EXPECT_EQ(DetectChatFormat("{{'<|user|>\\n' + message['content'] + '<|end|>\\n'}}"), ChatFormat::kPhi3);
  EXPECT_STREQ(EndOfTurnToken(ChatFormat::kGemma), "<end_of_turn>");
  // Without a template, by the vocabulary's turn markers; the template wins when there is one.
  auto vocab = [](std::vector<std::string> pieces) {
    return [pieces](std::string_view p) { return std::find(pieces.begin(), pieces.end(), p) != pieces.end(); };
  };
  EXPECT_EQ(DetectChatFormat("", vocab({"<bos>", "<start_of_turn>", "<end_of_turn>"})), ChatFormat::kGemma);
  EXPECT_EQ(DetectChatFormat("", vocab({"<|user|>", "<|end|>", "<|assistant|>"})), ChatFormat::kPhi3);
  EXPECT_EQ(DetectChatFormat("", vocab({"<|start_header_id|>"})), ChatFormat::kLlama3);
  EXPECT_EQ(DetectChatFormat("", vocab({"<s>"})), ChatFormat::kChatML);
  EXPECT_EQ(DetectChatFormat(kSmolLmTemplate, vocab({"<start_of_turn>"})), ChatFormat::kChatML);
  EXPECT_STREQ(EndOfTurnToken(ChatFormat::kPhi3), "<|end|>");
  EXPECT_STREQ(EndOfTurnToken(ChatFormat::kChatML), "<|im_end|>");
  EXPECT_STREQ(EndOfTurnToken(ChatFormat::kLlama2), "</s>");
  EXPECT_STREQ(EndOfTurnToken(ChatFormat::kLlama3), "<|eot_id|>");
  EXPECT_EQ(DefaultSystemPrompt("{{'<|im_start|>system\\nBe brief.<|im_end|>\\n'}}"), "Be brief.");
  EXPECT_EQ(DefaultSystemPrompt("{{'<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>'}}"), "");
  EXPECT_EQ(DefaultSystemPrompt(""), "");
}

TEST(ChatFormatTest, SmolLmTemplateFromTheModelFile) {
  REQUIRE_SMOLLM(tok);
  EXPECT_EQ(tok->chat_template(), kSmolLmTemplate);
  const ChatFormat format = DetectChatFormat(tok->chat_template());
  EXPECT_EQ(format, ChatFormat::kChatML);
  EXPECT_EQ(tok->TokenId(EndOfTurnToken(format)), tok->eot_id());
  const std::string prompt = RenderChat(format, kNoSystem, true, DefaultSystemPrompt(tok->chat_template()));
  const std::vector<int32_t> ids = tok->Encode(prompt, /*add_bos=*/false);
  EXPECT_EQ(ids.front(), 1);                                  // <|im_start|>
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 1), 5);        // system, 3 turns, generation prompt
  EXPECT_EQ(std::count(ids.begin(), ids.end(), tok->eot_id()), 4);
  EXPECT_EQ(tok->Decode(ids), prompt);
}

}  // namespace
}  // namespace tpserve
