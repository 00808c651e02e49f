// Chat rendering: an arbitrary chat template (before the first NUL) is classified, and arbitrary
// messages (after it: role and content alternate, separated by \x01) are rendered in every format.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "model/chat_format.h"
#include "tests/fuzz/fuzz_input.h"

using namespace tpserve;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view chat_template, rest;
  fuzz::SplitInput(std::string_view(reinterpret_cast<const char*>(data), size), '\0', &chat_template, &rest);
  const ChatFormat detected = DetectChatFormat(std::string(chat_template));
  (void)ChatFormatName(detected);
  const std::string default_system = DefaultSystemPrompt(std::string(chat_template));
  std::vector<ChatMessage> messages;
  while (!rest.empty()) {
    std::string_view role, content;
    fuzz::SplitInput(rest, '\x01', &role, &rest);
    fuzz::SplitInput(rest, '\x01', &content, &rest);
    messages.push_back({std::string(role), std::string(content)});
  }
  for (ChatFormat format : {ChatFormat::kChatML, ChatFormat::kLlama2, ChatFormat::kLlama3}) {
    (void)RenderChat(format, messages, /*add_generation_prompt=*/true, format == detected ? default_system : "");
    (void)EndOfTurnToken(format);
  }
  return 0;
}
