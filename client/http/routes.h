// The gateway's routes: which handler answers which method and path.
//
//   POST /v1/completions, /v1/chat/completions  → GenerationCall (generation_call.h)
//   GET  /v1/models                              → the served model
//   GET  /health                                 → 200 when a worker group serves, else 503
//   POST /tokenize, /detokenize                  → the coordinator's tokenizer (vLLM's shapes)
//   GET  /metrics                                → the coordinator's Prometheus text + tpserve:http_* lines
//
// /v1 routes need `Authorization: Bearer <key>` when the gateway has API keys (compared in
// constant time). Anything else is a 404 in OpenAI's error shape.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "client/http/http_session.h"

namespace tpserve::http {

// Answers the session's current request.
void Route(std::shared_ptr<HttpSession> session);

// Whether the Authorization header carries one of `keys` ("Bearer <key>"); true when keys is
// empty. Compares every key in time independent of where the bytes differ.
bool IsAuthorized(std::string_view authorization, const std::vector<std::string>& keys);

// The model name replies carry and requests may name: --served-model-name, else the
// coordinator's (from the link's last health probe), else "tpserve".
std::string ServedModelName(const GatewayContext& context);

// Sends a one-reply request (health, tokenize, detokenize, metrics) and calls on_reply with the
// reply of kind `kind` on the session's strand. A typed error, or no reply within
// control_timeout, is answered to the client (the error mapped, or 503) without calling on_reply.
void CallCoordinator(const std::shared_ptr<HttpSession>& session, proto::ClientMessage message,
                     proto::ServerMessageKind kind, std::function<void(const proto::ServerMessage&)> on_reply,
                     std::function<void(const proto::ErrorReply&)> on_error = {});

}  // namespace tpserve::http
