// HttpSession: one client connection (Boost.Beast over an Asio strand). It reads a request, hands
// it to the routes (routes.h), and writes what they answer: a whole reply, or a stream of
// Server-Sent Events in chunked transfer encoding. Keep-alive; bodies above max_body_bytes get 413.
//
// While a reply is pending (a generation can take long), the session keeps a read posted on the
// socket, so a client that goes away is noticed at once and the route's disconnect callback
// cancels the coordinator request. Every reply carries X-Request-Id (the client's, or a fresh one).
//
// Threading: every method runs on the session's strand (`executor()`); coordinator replies reach
// it through CoordinatorLink, which posts there.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "client/http/api_error.h"
#include "client/http/gateway_context.h"

namespace tpserve::http {

using Request = boost::beast::http::request<boost::beast::http::string_body>;

class HttpSession : public std::enable_shared_from_this<HttpSession> {
 public:
  HttpSession(boost::asio::ip::tcp::socket socket, GatewayContext& context);
  ~HttpSession();
  void Start();

  GatewayContext& context() { return context_; }
  boost::asio::any_io_executor executor() { return stream_.get_executor(); }
  const Request& request() const { return request_; }
  const std::string& request_id() const { return request_id_; }

  // --- answering the current request (exactly one of Reply / ReplyError / a stream) ---
  void Reply(unsigned status, const std::string& content_type, std::string body, int retry_after_s = 0);
  void ReplyError(const ApiError& error);
  // text/event-stream, chunked; then SendEvent(...)* and EndStream().
  void BeginStream();
  void SendEvent(std::string event);
  void EndStream();
  // Called once if the client disconnects before the reply is complete.
  void OnDisconnect(std::function<void()> callback) { on_disconnect_ = std::move(callback); }
  bool is_client_gone() const { return is_closed_; }

 private:
  void ReadRequest();
  void OnRequestRead(boost::beast::error_code ec);
  void WatchSocket();  // the read posted while a reply is pending
  void Write(std::string bytes, bool is_last);
  void WriteNext();
  void FinishExchange();  // the reply is complete: next request or close
  void Close();
  // After a reply sent before the whole request was read (413): stop sending, read and discard
  // what the client still sends (bounded in bytes and time), then close, so the client reads the
  // reply instead of failing its send on a reset connection.
  void LingeringClose();
  bool is_lingering_close_ = false;
  void SetCommonHeaders(boost::beast::http::response_header<>& header);

  boost::beast::tcp_stream stream_;
  GatewayContext& context_;
  boost::beast::flat_buffer buffer_;
  std::optional<boost::beast::http::request_parser<boost::beast::http::string_body>> parser_;
  Request request_;
  std::string request_id_;
  bool keep_alive_ = false;
  bool is_replying_ = false;      // a request is being answered
  bool is_streaming_ = false;
  bool is_watching_ = false;      // the watch read is posted
  bool is_reading_request_ = false;  // the request read is posted (never both: one read at a time)
  bool is_closed_ = false;
  std::function<void()> on_disconnect_;
  std::deque<std::pair<std::string, bool>> outbox_;  // (bytes, ends the reply)
  bool is_writing_ = false;
};

}  // namespace tpserve::http
