#include "client/http/routes.h"

#include <boost/asio/steady_timer.hpp>
#include <nlohmann/json.hpp>

#include "client/http/generation_call.h"
#include "client/http/openai_request.h"

namespace tpserve::http {
namespace {

using nlohmann::json;
namespace bhttp = boost::beast::http;

std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

void ReplyJson(HttpSession& session, const json& body) { session.Reply(200, "application/json", Dump(body)); }

void Health(const std::shared_ptr<HttpSession>& session) {
  proto::ClientMessage message;
  message.kind = proto::ClientMessageKind::kHealth;
  CallCoordinator(session, std::move(message), proto::ServerMessageKind::kHealth,
                  [session](const proto::ServerMessage& reply) {
                    const proto::HealthReply& h = reply.health;
                    json body = {{"status", h.ok ? "ok" : (h.draining ? "draining" : "no worker group")},
                                 {"worker_groups", h.num_worker_groups},
                                 {"model", h.model_name}};
                    session->Reply(h.ok ? 200 : 503, "application/json", Dump(body), h.ok ? 0 : 1);
                  });
}

void Models(const std::shared_ptr<HttpSession>& session) {
  const GatewayContext& context = session->context();
  json model = {{"id", ServedModelName(context)}, {"object", "model"}, {"created", 0}, {"owned_by", "tpserve"}};
  if (auto health = context.link->last_health()) model["max_model_len"] = health->context_length;
  ReplyJson(*session, {{"object", "list"}, {"data", json::array({model})}});
}

void Tokenize(const std::shared_ptr<HttpSession>& session) {
  auto parsed = ParseTokenizeRequest(session->request().body());
  if (auto* error = std::get_if<ApiError>(&parsed)) return session->ReplyError(*error);
  proto::ClientMessage message;
  message.kind = proto::ClientMessageKind::kTokenize;
  message.tokenize = std::move(std::get<proto::TokenizeRequest>(parsed));
  CallCoordinator(session, std::move(message), proto::ServerMessageKind::kTokenize,
                  [session](const proto::ServerMessage& reply) {
                    ReplyJson(*session, {{"count", reply.tokenize.token_ids.size()},
                                         {"max_model_len", reply.tokenize.max_model_len},
                                         {"tokens", reply.tokenize.token_ids}});
                  });
}

void Detokenize(const std::shared_ptr<HttpSession>& session) {
  auto parsed = ParseDetokenizeRequest(session->request().body());
  if (auto* error = std::get_if<ApiError>(&parsed)) return session->ReplyError(*error);
  proto::ClientMessage message;
  message.kind = proto::ClientMessageKind::kDetokenize;
  message.detokenize = std::move(std::get<proto::DetokenizeRequest>(parsed));
  CallCoordinator(session, std::move(message), proto::ServerMessageKind::kDetokenize,
                  [session](const proto::ServerMessage& reply) {
                    ReplyJson(*session, {{"prompt", reply.detokenize.text}});
                  });
}

// The gateway's own lines, appended to the coordinator's exposition.
std::string GatewayMetrics(const GatewayContext& context, bool is_coordinator_up) {
  const GatewayCounters& c = context.counters;
  std::string out;
  auto metric = [&](const char* name, const char* type, const char* help, int64_t value) {
    out += std::string("# HELP tpserve:http_") + name + " " + help + "\n# TYPE tpserve:http_" + name + " " + type +
           "\ntpserve:http_" + name + " " + std::to_string(value) + "\n";
  };
  metric("open_connections", "gauge", "HTTP connections open on this gateway.", c.open_connections.load());
  metric("active_generations", "gauge", "Completion requests in flight on this gateway.", c.active_generations.load());
  metric("requests_total", "counter", "HTTP requests received by this gateway.", int64_t(c.requests_total.load()));
  metric("client_disconnects_total", "counter", "Clients gone before their reply was complete.",
         int64_t(c.client_disconnects_total.load()));
  metric("coordinator_up", "gauge", "1 when the coordinator answered this scrape's metrics request.",
         is_coordinator_up ? 1 : 0);
  return out;
}

void Metrics(const std::shared_ptr<HttpSession>& session) {
  constexpr const char* kContentType = "text/plain; version=0.0.4; charset=utf-8";
  proto::ClientMessage message;
  message.kind = proto::ClientMessageKind::kMetrics;
  CallCoordinator(
      session, std::move(message), proto::ServerMessageKind::kMetrics,
      [session](const proto::ServerMessage& reply) {
        std::string text = reply.metrics.text;
        if (!text.empty() && text.back() != '\n') text += '\n';
        session->Reply(200, kContentType, text + GatewayMetrics(session->context(), true));
      },
      [session](const proto::ErrorReply&) {
        // The gateway's own lines still scrape; coordinator_up 0 says what is missing.
        session->Reply(200, kContentType, GatewayMetrics(session->context(), false));
      });
}

}  // namespace

bool IsAuthorized(std::string_view authorization, const std::vector<std::string>& keys) {
  if (keys.empty()) return true;
  constexpr std::string_view kBearer = "Bearer ";
  if (authorization.substr(0, kBearer.size()) != kBearer) return false;
  const std::string_view given = authorization.substr(kBearer.size());
  bool is_match = false;
  for (const std::string& key : keys) {
    // Constant time in the bytes: every byte of the longer string is visited.
    unsigned char diff = given.size() == key.size() ? 0 : 1;
    const size_t n = std::max(given.size(), key.size());
    for (size_t i = 0; i < n; ++i) {
      const unsigned char a = i < given.size() ? static_cast<unsigned char>(given[i]) : 0;
      const unsigned char b = i < key.size() ? static_cast<unsigned char>(key[i]) : 0;
      diff |= a ^ b;
    }
    is_match |= diff == 0;
  }
  return is_match;
}

std::string ServedModelName(const GatewayContext& context) {
  if (!context.options.served_model_name.empty()) return context.options.served_model_name;
  if (auto health = context.link->last_health(); health && !health->model_name.empty()) return health->model_name;
  return "tpserve";
}

void CallCoordinator(const std::shared_ptr<HttpSession>& session, proto::ClientMessage message,
                     proto::ServerMessageKind kind, std::function<void(const proto::ServerMessage&)> on_reply,
                     std::function<void(const proto::ErrorReply&)> on_error) {
  auto timer = std::make_shared<boost::asio::steady_timer>(session->executor());
  auto is_answered = std::make_shared<bool>(false);
  CoordinatorLink* link = session->context().link;
  const uint64_t id = link->Send(std::move(message), session->executor(),
                                 [session, timer, is_answered, kind, on_reply, on_error](const proto::ServerMessage& m) {
                                   if (*is_answered) return;
                                   if (m.kind != kind && m.kind != proto::ServerMessageKind::kError) return;
                                   *is_answered = true;
                                   timer->cancel();
                                   if (m.kind == proto::ServerMessageKind::kError) {
                                     if (on_error) return on_error(m.error);
                                     return session->ReplyError(FromCoordinatorError(m.error));
                                   }
                                   on_reply(m);
                                 });
  timer->expires_after(session->context().options.control_timeout);
  timer->async_wait([session, is_answered, link, id, on_error](boost::system::error_code ec) {
    link->Forget(id);
    if (ec || *is_answered) return;
    *is_answered = true;
    if (on_error) return on_error(proto::ErrorReply{proto::ErrorKind::kUnavailable, "no reply"});
    session->ReplyError(CoordinatorTimeout());
  });
}

void Route(std::shared_ptr<HttpSession> session) {
  const Request& request = session->request();
  const std::string target_text(request.target());
  std::string_view target = target_text;
  target = target.substr(0, target.find('?'));
  const bool is_get = request.method() == bhttp::verb::get;
  const bool is_post = request.method() == bhttp::verb::post;
  if (target.substr(0, 4) == "/v1/") {
    const auto auth = request.find(bhttp::field::authorization);
    if (!IsAuthorized(auth == request.end() ? std::string_view() : std::string_view(auth->value().data(), auth->value().size()),
                      session->context().options.api_keys)) {
      return session->ReplyError(Unauthorized());
    }
  }
  if (is_post && target == "/v1/completions") return GenerationCall::Start(session, Endpoint::kCompletions);
  if (is_post && target == "/v1/chat/completions") return GenerationCall::Start(session, Endpoint::kChatCompletions);
  if (is_get && target == "/v1/models") return Models(session);
  if (is_get && target == "/health") return Health(session);
  if (is_post && target == "/tokenize") return Tokenize(session);
  if (is_post && target == "/detokenize") return Detokenize(session);
  if (is_get && target == "/metrics") return Metrics(session);
  session->ReplyError(RouteNotFound(std::string(request.method_string()), std::string(target)));
}

}  // namespace tpserve::http
