#include "coordinator/tokenizer_requests.h"

#include "common/check.h"

namespace tpserve {
namespace {

StatusOr<proto::TokenizeReply> Tokenize(const proto::TokenizeRequest& request, const PromptBuilder& prompt_builder,
                                        const Tokenizer* tokenizer, const ModelLimits& limits) {
  if (tokenizer == nullptr) return InvalidArgument("this model has no tokenizer");
  proto::TokenizeReply reply;
  reply.max_model_len = static_cast<uint32_t>(limits.context_length);
  if (request.prompt_kind == proto::PromptKind::kText && !request.add_special_tokens) {
    reply.token_ids = tokenizer->Encode(request.prompt_text, /*add_bos=*/false, /*parse_special=*/false);
    return reply;
  }
  // As a generate request with this prompt would be tokenized.
  proto::GenerateRequest generate;
  generate.prompt_kind = request.prompt_kind;
  generate.prompt_text = request.prompt_text;
  generate.chat = request.chat;
  for (const proto::ChatMessage& m : generate.chat) {
    if (m.role != "system" && m.role != "user" && m.role != "assistant") {
      return InvalidArgument("chat role \"" + m.role.substr(0, 32) + "\" is not system, user or assistant");
    }
  }
  ASSIGN_OR_RETURN(reply.token_ids, prompt_builder.Build(generate));
  return reply;
}

StatusOr<proto::DetokenizeReply> Detokenize(const proto::DetokenizeRequest& request, const Tokenizer* tokenizer,
                                            const ModelLimits& limits) {
  if (tokenizer == nullptr) return InvalidArgument("this model has no tokenizer");
  for (int32_t id : request.token_ids) {
    if (id < 0 || id >= limits.vocab_size) {
      return InvalidArgument("tokens contains token id " + std::to_string(id) + ", outside the vocabulary [0, " +
                             std::to_string(limits.vocab_size) + ")");
    }
  }
  return proto::DetokenizeReply{tokenizer->Decode(request.token_ids)};
}

}  // namespace

proto::ServerMessage AnswerTokenizerRequest(const proto::ClientMessage& message, const PromptBuilder& prompt_builder,
                                            const Tokenizer* tokenizer, const ModelLimits& limits) {
  CHECK(message.kind == proto::ClientMessageKind::kTokenize || message.kind == proto::ClientMessageKind::kDetokenize);
  proto::ServerMessage reply;
  reply.request_id = message.request_id;
  Status status;
  if (message.kind == proto::ClientMessageKind::kTokenize) {
    StatusOr<proto::TokenizeReply> tokens = Tokenize(message.tokenize, prompt_builder, tokenizer, limits);
    if (tokens.ok()) {
      reply.kind = proto::ServerMessageKind::kTokenize;
      reply.tokenize = std::move(*tokens);
      return reply;
    }
    status = tokens.status();
  } else {
    StatusOr<proto::DetokenizeReply> text = Detokenize(message.detokenize, tokenizer, limits);
    if (text.ok()) {
      reply.kind = proto::ServerMessageKind::kDetokenize;
      reply.detokenize = std::move(*text);
      return reply;
    }
    status = text.status();
  }
  return proto::MakeErrorMessage(message.request_id, proto::ErrorKindFromStatus(status), status.message());
}

}  // namespace tpserve
