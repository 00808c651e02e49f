#include "client/http/generation_call.h"

#include <chrono>
#include <random>

#include "client/http/routes.h"

namespace tpserve::http {

void GenerationCall::Start(std::shared_ptr<HttpSession> session, Endpoint endpoint) {
  ParsedRequest parsed = ParseOpenAiRequest(endpoint, session->request().body());
  if (auto* error = std::get_if<ApiError>(&parsed)) return session->ReplyError(*error);
  OpenAiRequest request = std::move(std::get<OpenAiRequest>(parsed));
  const GatewayContext& context = session->context();
  if (!request.model.empty() && request.model != ServedModelName(context)) {
    // The coordinator's own name is accepted too (when --served-model-name renames it).
    auto health = context.link->last_health();
    if (!health || request.model != health->model_name) return session->ReplyError(ModelNotFound(request.model));
  }
  std::shared_ptr<GenerationCall> call(new GenerationCall(session, std::move(request)));
  session->OnDisconnect([call] { call->CancelAll(); });
  call->Prepare();
}

GenerationCall::GenerationCall(std::shared_ptr<HttpSession> session, OpenAiRequest request)
    : session_(std::move(session)), request_(std::move(request)) {
  session_->context().counters.active_generations.fetch_add(1);
  const std::string prefix = request_.endpoint == Endpoint::kCompletions ? "cmpl-" : "chatcmpl-";
  const int64_t created = std::chrono::duration_cast<std::chrono::seconds>(
                              std::chrono::system_clock::now().time_since_epoch()).count();
  assembler_.emplace(request_, prefix + session_->request_id(), ServedModelName(session_->context()), created);
  num_finished_.assign(request_.prompts.size(), 0);
  if (!request_.seed_given && request_.prompts.size() > 1) {
    const uint64_t seed = std::random_device{}() * 0x100000000ull + std::random_device{}();
    for (proto::GenerateRequest& p : request_.prompts) {
      p.sampling.seed = seed;
      p.sampling.has_seed = true;
    }
  }
}

GenerationCall::~GenerationCall() { session_->context().counters.active_generations.fetch_sub(1); }

void GenerationCall::Prepare() {
  if (is_over_) return;  // the client left while the prompt was being tokenized
  auto self = shared_from_this();
  if (request_.endpoint == Endpoint::kChatCompletions && !request_.has_max_tokens) {
    request_.has_max_tokens = true;
    proto::ClientMessage message;
    message.kind = proto::ClientMessageKind::kTokenize;
    message.tokenize.prompt_kind = proto::PromptKind::kChat;
    message.tokenize.chat = request_.prompts[0].chat;
    CallCoordinator(session_, std::move(message), proto::ServerMessageKind::kTokenize,
                    [self](const proto::ServerMessage& reply) {
                      const int64_t left = int64_t(reply.tokenize.max_model_len) - int64_t(reply.tokenize.token_ids.size());
                      // A prompt that fills the context: max_tokens 1 lets the coordinator say so.
                      self->request_.prompts[0].max_tokens = static_cast<uint32_t>(std::max<int64_t>(left, 1));
                      self->Prepare();
                    });
    return;
  }
  for (size_t p = 0; p < request_.prompts.size(); ++p) {
    if (!request_.echo || request_.prompts[p].prompt_kind != proto::PromptKind::kTokenIds) continue;
    ++num_pending_echo_;
    proto::ClientMessage message;
    message.kind = proto::ClientMessageKind::kDetokenize;
    message.detokenize.token_ids = request_.prompts[p].prompt_ids;
    CallCoordinator(session_, std::move(message), proto::ServerMessageKind::kDetokenize,
                    [self, p](const proto::ServerMessage& reply) {
                      self->assembler_->SetEchoText(p, reply.detokenize.text);
                      --self->num_pending_echo_;
                      self->MaybeComplete();
                    });
  }
  SendPrompts();
}

void GenerationCall::SendPrompts() {
  auto self = shared_from_this();
  CoordinatorLink* link = session_->context().link;
  for (size_t p = 0; p < request_.prompts.size(); ++p) {
    proto::ClientMessage message;
    message.kind = proto::ClientMessageKind::kGenerate;
    message.generate = request_.prompts[p];
    link_ids_.push_back(link->Send(std::move(message), session_->executor(),
                                   [self, p](const proto::ServerMessage& m) { self->OnMessage(p, m); }));
  }
}

void GenerationCall::OnMessage(size_t prompt_index, const proto::ServerMessage& message) {
  if (is_over_) return;
  if (message.kind == proto::ServerMessageKind::kError) return Fail(FromCoordinatorError(message.error));
  if (request_.stream && !is_stream_started_) {
    session_->BeginStream();
    is_stream_started_ = true;
  }
  for (const std::string& payload : assembler_->OnMessage(prompt_index, message)) session_->SendEvent(SseEvent(payload));
  if (message.kind == proto::ServerMessageKind::kFinish && ++num_finished_[prompt_index] == request_.n) {
    session_->context().link->Forget(link_ids_[prompt_index]);
  }
  MaybeComplete();
}

void GenerationCall::MaybeComplete() {
  if (is_over_ || !assembler_->is_done() || num_pending_echo_ > 0) return;
  if (request_.echo && request_.num_top_logprobs && !assembler_->has_prompt_logprobs()) {
    // A coordinator without prompt logprobs ignores the field: say so rather than omit them.
    return Fail({501, "internal_error", "the coordinator returned no prompt logprobs (echo with logprobs needs them)",
                 "echo", "prompt_logprobs_unsupported", 0});
  }
  is_over_ = true;
  if (!request_.stream) return session_->Reply(200, "application/json", assembler_->Body());
  if (const std::string tail = assembler_->Tail(); !tail.empty()) session_->SendEvent(SseEvent(tail));
  session_->SendEvent(kSseDone);
  session_->EndStream();
}

void GenerationCall::Fail(const ApiError& error) {
  if (is_over_) return;
  CancelAll();
  session_->ReplyError(error);  // an error event then [DONE] when streaming began
}

void GenerationCall::CancelAll() {
  is_over_ = true;
  CoordinatorLink* link = session_->context().link;
  for (size_t p = 0; p < link_ids_.size(); ++p) {
    if (num_finished_[p] < request_.n) link->Cancel(link_ids_[p]);
  }
}

}  // namespace tpserve::http
