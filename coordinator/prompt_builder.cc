#include "coordinator/prompt_builder.h"

namespace tpserve {

PromptBuilder::PromptBuilder(const Tokenizer* tokenizer) : tokenizer_(tokenizer) {
  if (tokenizer_ == nullptr) return;
  chat_format_ = DetectChatFormat(tokenizer_->chat_template(),
                                  [this](std::string_view piece) { return tokenizer_->TokenId(piece).has_value(); });
  default_system_ = DefaultSystemPrompt(tokenizer_->chat_template());
  std::optional<int32_t> eot = tokenizer_->TokenId(EndOfTurnToken(chat_format_));
  end_of_turn_id_ = eot ? *eot : tokenizer_->eot_id();
}

StatusOr<std::vector<int32_t>> PromptBuilder::Build(const proto::GenerateRequest& request) const {
  if (request.prompt_kind == proto::PromptKind::kTokenIds) return request.prompt_ids;
  if (tokenizer_ == nullptr) {
    return InvalidArgument("this model has no tokenizer: send the prompt as token ids");
  }
  if (request.prompt_kind == proto::PromptKind::kText) {
    // Text prompts are plain text: special-token markers in it stay text.
    return tokenizer_->Encode(request.prompt_text, tokenizer_->add_bos(), /*parse_special=*/false);
  }
  std::vector<ChatMessage> messages;
  messages.reserve(request.chat.size());
  for (const proto::ChatMessage& m : request.chat) messages.push_back({m.role, m.content});
  std::string text = RenderChat(chat_format_, messages, /*add_generation_prompt=*/true, default_system_);
  return tokenizer_->Encode(text, /*add_bos=*/false, /*parse_special=*/true);
}

}  // namespace tpserve
