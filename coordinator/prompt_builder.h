// PromptBuilder: the prompt token ids of a generate request — token ids as given, text through the
// model's tokenizer, chat messages rendered with the model's chat format then tokenized.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "comm/client_codec.h"
#include "common/status.h"
#include "model/chat_format.h"
#include "model/tokenizer.h"

namespace tpserve {

class PromptBuilder {
 public:
  // `tokenizer` may be null (a model without one): then only token-id prompts are accepted.
  // It must outlive the builder.
  explicit PromptBuilder(const Tokenizer* tokenizer);

  // INVALID_ARGUMENT for a text or chat prompt when there is no tokenizer.
  StatusOr<std::vector<int32_t>> Build(const proto::GenerateRequest& request) const;

  // The end-of-turn token of the chat format (-1 if none), which also ends chat requests.
  int32_t end_of_turn_id() const { return end_of_turn_id_; }
  ChatFormat chat_format() const { return chat_format_; }

 private:
  const Tokenizer* tokenizer_;
  ChatFormat chat_format_ = ChatFormat::kChatML;
  std::string default_system_;
  int32_t end_of_turn_id_ = -1;
};

}  // namespace tpserve
