#include "model/chat_format.h"

#include <string_view>

namespace tpserve {
namespace {

std::string_view Strip(std::string_view s) {
  constexpr std::string_view kSpace = " \t\n\r\f\v";
  const size_t begin = s.find_first_not_of(kSpace);
  if (begin == std::string_view::npos) return {};
  return s.substr(begin, s.find_last_not_of(kSpace) - begin + 1);
}

std::string RenderChatML(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                         const std::string& default_system) {
  std::string out;
  auto turn = [&](std::string_view role, std::string_view content) {
    out.append("<|im_start|>").append(role).append("\n").append(content).append("<|im_end|>\n");
  };
  if (!messages.empty() && messages[0].role != "system" && !default_system.empty()) turn("system", default_system);
  for (const ChatMessage& m : messages) turn(m.role, m.content);
  if (add_generation_prompt) out += "<|im_start|>assistant\n";
  return out;
}

// Meta's chat_completion layout (and the Llama-2-chat HF template): every user turn opens with
// BOS, every answer closes with EOS; a system prompt is folded into the first user turn.
std::string RenderLlama2(const std::vector<ChatMessage>& messages) {
  std::string out;
  size_t first = 0;
  std::string system;
  bool has_system = false;
  if (!messages.empty() && messages[0].role == "system") {
    system = messages[0].content;
    has_system = true;
    first = 1;
  }
  for (size_t i = first; i < messages.size(); ++i) {
    std::string content = messages[i].content;
    if (i == first && has_system) content = "<<SYS>>\n" + system + "\n<</SYS>>\n\n" + content;
    if (messages[i].role == "assistant") {
      out.append(" ").append(Strip(content)).append(" </s>");
    } else {
      out.append("<s>[INST] ").append(Strip(content)).append(" [/INST]");
    }
  }
  return out;
}

std::string RenderLlama3(const std::vector<ChatMessage>& messages, bool add_generation_prompt) {
  std::string out;
  if (!messages.empty()) out += "<|begin_of_text|>";
  for (const ChatMessage& m : messages) {
    out.append("<|start_header_id|>").append(m.role).append("<|end_header_id|>\n\n");
    out.append(Strip(m.content)).append("<|eot_id|>");
  }
  if (add_generation_prompt) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
  return out;
}

// Gemma 3's template: BOS, then turns <start_of_turn>role\n...<end_of_turn>\n with the assistant named
// "model"; a leading system message becomes the first turn's prefix.
std::string RenderGemma(const std::vector<ChatMessage>& messages, bool add_generation_prompt) {
  std::string out = "<bos>";
  size_t first = 0;
  std::string prefix;
  if (!messages.empty() && messages[0].role == "system") {
    prefix = messages[0].content + "\n\n";
    first = 1;
  }
  for (size_t i = first; i < messages.size(); ++i) {
    const std::string& role = messages[i].role == "assistant" ? "model" : messages[i].role;
    out.append("<start_of_turn>").append(role).append("\n");
    if (i == first) out += prefix;
    out.append(Strip(messages[i].content)).append("<end_of_turn>\n");
  }
  if (add_generation_prompt) out += "<start_of_turn>model\n";
  return out;
}

// Phi-3-mini's template: <|role|>\ncontent<|end|>\n for system, user and assistant turns.
std::string RenderPhi3(const std::vector<ChatMessage>& messages, bool add_generation_prompt) {
  std::string out;
  for (const ChatMessage& m : messages) {
    if (m.role != "system" && m.role != "user" && m.role != "assistant") continue;
    out.append("<|").append(m.role).append("|>\n").append(m.content).append("<|end|>\n");
  }
  out += add_generation_prompt ? "<|assistant|>\n" : "<|endoftext|>";
  return out;
}

}  // namespace

ChatFormat DetectChatFormat(const std::string& chat_template) {
  if (chat_template.find("<|start_header_id|>") != std::string::npos) return ChatFormat::kLlama3;
  if (chat_template.find("<|im_start|>") != std::string::npos) return ChatFormat::kChatML;
  if (chat_template.find("[INST]") != std::string::npos) return ChatFormat::kLlama2;
  if (chat_template.find("<start_of_turn>") != std::string::npos) return ChatFormat::kGemma;
  if (chat_template.find("<|user|>") != std::string::npos && chat_template.find("<|end|>") != std::string::npos) {
    return ChatFormat::kPhi3;
  }
  return ChatFormat::kChatML;
}

ChatFormat DetectChatFormat(const std::string& chat_template, const std::function<bool(std::string_view)>& has_token) {
  if (!chat_template.empty()) return DetectChatFormat(chat_template);
  if (has_token("<start_of_turn>")) return ChatFormat::kGemma;
  if (has_token("<|start_header_id|>")) return ChatFormat::kLlama3;
  if (has_token("<|im_start|>")) return ChatFormat::kChatML;
  if (has_token("<|user|>") && has_token("<|end|>")) return ChatFormat::kPhi3;
  return ChatFormat::kChatML;
}

const char* ChatFormatName(ChatFormat format) {
  switch (format) {
    case ChatFormat::kChatML: return "chatml";
    case ChatFormat::kLlama2: return "llama2";
    case ChatFormat::kLlama3: return "llama3";
    case ChatFormat::kGemma: return "gemma";
    case ChatFormat::kPhi3: return "phi3";
  }
  return "?";
}

std::string DefaultSystemPrompt(const std::string& chat_template) {
  // A literal "<|im_start|>system" + newline (real or escaped) + text + "<|im_end|>" in the template.
  constexpr std::string_view kOpen = "<|im_start|>system";
  constexpr std::string_view kClose = "<|im_end|>";
  for (size_t pos = chat_template.find(kOpen); pos != std::string::npos; pos = chat_template.find(kOpen, pos + 1)) {
    size_t begin = pos + kOpen.size();
    if (chat_template.compare(begin, 1, "\n") == 0) {
      begin += 1;
    } else if (chat_template.compare(begin, 2, "\\n") == 0) {
      begin += 2;
    } else {
      continue;
    }
    const size_t end = chat_template.find(kClose, begin);
    if (end == std::string::npos) break;
    const std::string_view text = std::string_view(chat_template).substr(begin, end - begin);
    // Only a literal: anything Jinja would substitute or end the string at disqualifies it.
    if (text.empty() || text.find_first_of("{}'\"\n\\") != std::string_view::npos) continue;
    return std::string(text);
  }
  return "";
}

std::string RenderChat(ChatFormat format, const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                       const std::string& default_system) {
  switch (format) {
    case ChatFormat::kChatML: return RenderChatML(messages, add_generation_prompt, default_system);
    case ChatFormat::kLlama2: return RenderLlama2(messages);
    case ChatFormat::kLlama3: return RenderLlama3(messages, add_generation_prompt);
    case ChatFormat::kGemma: return RenderGemma(messages, add_generation_prompt);
    case ChatFormat::kPhi3: return RenderPhi3(messages, add_generation_prompt);
  }
  return "";
}

const char* EndOfTurnToken(ChatFormat format) {
  switch (format) {
    case ChatFormat::kChatML: return "<|im_end|>";
    case ChatFormat::kLlama2: return "</s>";
    case ChatFormat::kLlama3: return "<|eot_id|>";
    case ChatFormat::kGemma: return "<end_of_turn>";
    case ChatFormat::kPhi3: return "<|end|>";
  }
  return "";
}

}  // namespace tpserve
