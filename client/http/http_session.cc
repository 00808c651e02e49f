#include "client/http/http_session.h"

#include <random>
#include <sstream>

#include <boost/asio/dispatch.hpp>

#include "client/http/openai_response.h"
#include "client/http/routes.h"

namespace tpserve::http {
namespace {

namespace beast = boost::beast;
namespace bhttp = boost::beast::http;

constexpr auto kRequestReadTimeout = std::chrono::seconds(120);  // idle keep-alive / slow header
constexpr auto kWriteTimeout = std::chrono::seconds(60);         // a client that stops reading
constexpr size_t kMaxRequestIdBytes = 128;

std::string FreshRequestId() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(rng()));
  return buf;
}

// The client's X-Request-Id when it is short printable ASCII without separators, else a fresh one.
std::string RequestIdOf(const Request& request) {
  const auto it = request.find("X-Request-Id");
  if (it == request.end()) return FreshRequestId();
  const std::string id(it->value());
  if (id.empty() || id.size() > kMaxRequestIdBytes) return FreshRequestId();
  for (char c : id) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.')) return FreshRequestId();
  }
  return id;
}

std::string Chunk(const std::string& data) {
  std::ostringstream os;
  os << std::hex << data.size() << "\r\n" << data << "\r\n";
  return os.str();
}

}  // namespace

HttpSession::HttpSession(boost::asio::ip::tcp::socket socket, GatewayContext& context)
    : stream_(std::move(socket)), context_(context) {
  context_.counters.open_connections.fetch_add(1);
}

HttpSession::~HttpSession() { context_.counters.open_connections.fetch_sub(1); }

void HttpSession::Start() {
  boost::asio::dispatch(stream_.get_executor(), [self = shared_from_this()] { self->ReadRequest(); });
}

void HttpSession::ReadRequest() {
  if (is_reading_request_ || is_watching_ || is_closed_) return;
  is_reading_request_ = true;
  parser_.emplace();
  parser_->body_limit(context_.options.max_body_bytes);
  parser_->header_limit(64 * 1024);
  stream_.expires_after(kRequestReadTimeout);
  bhttp::async_read(stream_, buffer_, *parser_,
                    [self = shared_from_this()](beast::error_code ec, size_t) { self->OnRequestRead(ec); });
}

void HttpSession::OnRequestRead(beast::error_code ec) {
  is_reading_request_ = false;
  if (ec == bhttp::error::body_limit) {
    // The header was read: answer 413, then close (the rest of the body is not read).
    request_ = parser_->get();
    request_id_ = RequestIdOf(request_);
    keep_alive_ = false;
    is_replying_ = true;
    is_lingering_close_ = true;
    ReplyError(BodyTooLarge(context_.options.max_body_bytes));
    return;
  }
  if (ec) return Close();  // eof, timeout, a malformed request line: nothing to answer
  request_ = parser_->release();
  request_id_ = RequestIdOf(request_);
  keep_alive_ = request_.keep_alive();
  is_replying_ = true;
  on_disconnect_ = nullptr;
  context_.counters.requests_total.fetch_add(1);
  stream_.expires_never();
  WatchSocket();
  Route(shared_from_this());
}

void HttpSession::WatchSocket() {
  if (is_watching_ || is_reading_request_ || is_closed_) return;
  is_watching_ = true;
  stream_.async_read_some(buffer_.prepare(4096), [self = shared_from_this()](beast::error_code ec, size_t n) {
    self->is_watching_ = false;
    if (ec) {
      if (self->is_replying_ && self->on_disconnect_) {
        self->context_.counters.client_disconnects_total.fetch_add(1);
        auto callback = std::move(self->on_disconnect_);
        self->on_disconnect_ = nullptr;
        callback();
      }
      return self->Close();
    }
    self->buffer_.commit(n);  // a pipelined next request: parsed after this reply
    if (self->is_replying_) {
      if (self->buffer_.size() < 64 * 1024) self->WatchSocket();
    } else {
      self->ReadRequest();
    }
  });
}

void HttpSession::SetCommonHeaders(bhttp::response_header<>& header) {
  header.set(bhttp::field::server, "tpserve-http");
  header.set("X-Request-Id", request_id_);
}

void HttpSession::Reply(unsigned status, const std::string& content_type, std::string body, int retry_after_s) {
  if (!is_replying_ || is_streaming_) return;
  bhttp::response<bhttp::string_body> response{static_cast<bhttp::status>(status), request_.version()};
  SetCommonHeaders(response.base());
  response.set(bhttp::field::content_type, content_type);
  if (retry_after_s > 0) response.set(bhttp::field::retry_after, std::to_string(retry_after_s));
  response.keep_alive(keep_alive_);
  response.body() = std::move(body);
  response.prepare_payload();
  std::ostringstream os;
  os << response;
  Write(os.str(), /*is_last=*/true);
}

void HttpSession::ReplyError(const ApiError& error) {
  if (is_streaming_) {
    // Streaming began: the error is an event, then [DONE].
    SendEvent(SseEvent(error.ToJson()));
    SendEvent(kSseDone);
    return EndStream();
  }
  Reply(error.status, "application/json", error.ToJson(), error.retry_after_s);
}

void HttpSession::BeginStream() {
  if (!is_replying_ || is_streaming_) return;
  is_streaming_ = true;
  // The header by hand (Beast's serializer would need the body type to stay alive across
  // writes): the status line and fields of a chunked 200 event stream.
  std::string header = "HTTP/1.1 200 OK\r\nServer: tpserve-http\r\nContent-Type: text/event-stream\r\n"
                       "Cache-Control: no-cache\r\nTransfer-Encoding: chunked\r\nX-Request-Id: " + request_id_ + "\r\n";
  header += keep_alive_ ? "Connection: keep-alive\r\n\r\n" : "Connection: close\r\n\r\n";
  Write(std::move(header), false);
}

void HttpSession::SendEvent(std::string event) {
  if (!is_streaming_) return;
  Write(Chunk(event), false);
}

void HttpSession::EndStream() {
  if (!is_streaming_) return;
  is_streaming_ = false;
  Write("0\r\n\r\n", true);
}

void HttpSession::Write(std::string bytes, bool is_last) {
  if (is_closed_) return;
  if (is_last) {
    is_replying_ = false;
    on_disconnect_ = nullptr;
  }
  outbox_.emplace_back(std::move(bytes), is_last);
  if (!is_writing_) WriteNext();
}

void HttpSession::WriteNext() {
  if (outbox_.empty() || is_closed_) return;
  is_writing_ = true;
  stream_.expires_after(kWriteTimeout);
  auto buffer = std::make_shared<std::pair<std::string, bool>>(std::move(outbox_.front()));
  outbox_.pop_front();
  boost::asio::async_write(stream_, boost::asio::buffer(buffer->first),
                           [self = shared_from_this(), buffer](beast::error_code ec, size_t) {
                             self->is_writing_ = false;
                             if (ec) {
                               if (self->on_disconnect_) {
                                 self->context_.counters.client_disconnects_total.fetch_add(1);
                                 auto callback = std::move(self->on_disconnect_);
                                 self->on_disconnect_ = nullptr;
                                 callback();
                               }
                               return self->Close();
                             }
                             self->stream_.expires_never();
                             if (buffer->second) return self->FinishExchange();
                             self->WriteNext();
                           });
}

void HttpSession::FinishExchange() {
  if (is_lingering_close_) return LingeringClose();
  if (!keep_alive_) return Close();
  if (!outbox_.empty()) return WriteNext();
  // The watch read, when posted, turns into the next request's read as data arrives; it may
  // have done so already (its completion can run before this write's).
  ReadRequest();
}

void HttpSession::LingeringClose() {
  constexpr size_t kMaxDiscardBytes = size_t{64} << 20;
  beast::error_code ec;
  stream_.socket().shutdown(boost::asio::ip::tcp::socket::shutdown_send, ec);
  stream_.expires_after(std::chrono::seconds(5));
  auto discard = std::make_shared<std::pair<std::vector<char>, size_t>>(std::vector<char>(64 * 1024), 0);
  auto read = std::make_shared<std::function<void()>>();
  *read = [self = shared_from_this(), discard, read]() {
    self->stream_.async_read_some(boost::asio::buffer(discard->first), [self, discard, read](beast::error_code ec, size_t n) {
      discard->second += n;
      if (ec || discard->second > kMaxDiscardBytes) {
        *read = nullptr;  // breaks the cycle
        return self->Close();
      }
      (*read)();
    });
  };
  (*read)();
}

void HttpSession::Close() {
  if (is_closed_) return;
  is_closed_ = true;
  beast::error_code ec;
  stream_.socket().shutdown(boost::asio::ip::tcp::socket::shutdown_send, ec);
  stream_.socket().close(ec);
}

}  // namespace tpserve::http
