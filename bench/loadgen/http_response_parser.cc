#include "bench/loadgen/http_response_parser.h"

#include <boost/asio/buffer.hpp>
#include <boost/beast/http/error.hpp>

#include <cstdint>
#include <limits>

namespace tpserve::loadgen {

namespace http = boost::beast::http;

void HttpResponseParser::Reset() {
  parser_.emplace();
  parser_->eager(true);  // parse all the body bytes given, not only the header
  parser_->header_limit(kMaxHeaderBytes);
  // A stream is as long as the server makes it. Not boost::none: Boost 1.74 compares a Content-Length
  // with the empty optional and refuses every body.
  parser_->body_limit(std::numeric_limits<uint64_t>::max());
}

Status HttpResponseParser::Failed(const std::string& what) {
  failed_ = true;
  return DataLoss("http: " + what);
}

std::optional<std::string> HttpResponseParser::Header(std::string_view name) const {
  if (!headers_done()) return std::nullopt;
  const auto it = parser_->get().find(boost::beast::string_view(name.data(), name.size()));
  if (it == parser_->get().end()) return std::nullopt;
  return std::string(it->value());
}

Status HttpResponseParser::Feed(std::string_view bytes, std::string* body) {
  if (failed_) return DataLoss("http: the response was already malformed");
  if (parser_->is_done()) return OkStatus();
  pending_.append(bytes);
  while (!pending_.empty() && !parser_->is_done()) {
    boost::system::error_code ec;
    const size_t used = parser_->put(boost::asio::buffer(pending_), ec);
    pending_.erase(0, used);
    if (ec == http::error::need_more) break;
    if (ec) return Failed(ec.message());
    if (parser_->is_done() && parser_->get().result_int() / 100 == 1) Reset();  // interim: the real one follows
    if (used == 0 && !parser_->is_done()) break;
  }
  std::string& decoded = parser_->get().body();  // string_body appends at its end: take what came
  body->append(decoded);
  decoded.clear();
  if (parser_->is_done()) pending_.clear();
  return OkStatus();
}

Status HttpResponseParser::FinishAtEof() {
  if (failed_) return DataLoss("http: the response was already malformed");
  if (parser_->is_done()) return OkStatus();
  boost::system::error_code ec;
  parser_->put_eof(ec);
  if (ec) return Failed("the connection closed inside the " + std::string(parser_->is_header_done() ? "body" : "headers") +
                        " (" + ec.message() + ")");
  return OkStatus();
}

}  // namespace tpserve::loadgen
