// The coordinator's answers to the client protocol's `tokenize` and `detokenize` requests (what
// the HTTP gateway's /tokenize and /detokenize forward): the same tokenization a generate request
// gets (PromptBuilder: BOS when the model asks, chat format for messages), and Tokenizer::Decode.
#pragma once

#include "comm/client_codec.h"
#include "coordinator/prompt_builder.h"
#include "coordinator/request_validation.h"
#include "model/tokenizer.h"

namespace tpserve {

// The reply to a kTokenize or kDetokenize message: its `tokenize`/`detokenize` reply, or an
// `error` (invalid_request: no tokenizer, an id outside [0, V), an unknown chat role).
// `tokenizer` may be null (a model without one). REQUIRES: message.kind is kTokenize or kDetokenize.
proto::ServerMessage AnswerTokenizerRequest(const proto::ClientMessage& message, const PromptBuilder& prompt_builder,
                                            const Tokenizer* tokenizer, const ModelLimits& limits);

}  // namespace tpserve
