// GenerationCall: one /v1/completions or /v1/chat/completions request in flight. It parses the
// body, sends one coordinator generate request per prompt through the link, feeds their replies
// to a ResponseAssembler and writes the result: SSE events as they come (stream), or the whole
// body at the end. The stream's header goes out with the first reply that is not an error, so a
// request the coordinator refuses at once (overloaded, invalid) still gets its HTTP status.
//
// Before generating: a chat request without max_tokens is tokenized first, so max_tokens can be
// the context left after the prompt (vLLM's default); an echo of a token-id prompt detokenizes
// the prompt. A batch without a seed gets one seed drawn here for all its prompts, so the seed
// the reply reports replays the whole batch.
//
// The client disconnecting cancels every prompt's coordinator request; a coordinator error
// cancels the other prompts and is the reply (or, once streaming, an error event then [DONE]).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "client/http/http_session.h"
#include "client/http/openai_request.h"
#include "client/http/openai_response.h"

namespace tpserve::http {

class GenerationCall : public std::enable_shared_from_this<GenerationCall> {
 public:
  static void Start(std::shared_ptr<HttpSession> session, Endpoint endpoint);
  ~GenerationCall();

 private:
  GenerationCall(std::shared_ptr<HttpSession> session, OpenAiRequest request);
  void Prepare();          // tokenize / detokenize steps, then SendPrompts
  void SendPrompts();
  void OnMessage(size_t prompt_index, const proto::ServerMessage& message);
  void MaybeComplete();
  void Fail(const ApiError& error);
  void CancelAll();

  std::shared_ptr<HttpSession> session_;
  OpenAiRequest request_;
  std::optional<ResponseAssembler> assembler_;
  std::vector<uint64_t> link_ids_;           // [P] coordinator request ids
  std::vector<uint32_t> num_finished_;       // [P] finished samples per prompt
  int num_pending_echo_ = 0;                 // detokenize replies still awaited
  bool is_stream_started_ = false;
  bool is_over_ = false;                     // replied, failed or cancelled
};

}  // namespace tpserve::http
