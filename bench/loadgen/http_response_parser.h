// HttpResponseParser: an incremental reader of one HTTP/1.1 response (RFC 9112) as it arrives on a
// socket, for the load generator's openai http backend. The parsing is Boost.Beast's
// (http::response_parser, the library tpserve's gateway uses): the status line, the header fields,
// then the body, framed by Transfer-Encoding: chunked, by Content-Length, or by the peer closing the
// connection. Interim 1xx responses are skipped. Bytes may be split anywhere; Feed hands the decoded
// body bytes over as they arrive, so a streamed (SSE) body can be read while it is still coming.
#pragma once

#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"

namespace tpserve::loadgen {

class HttpResponseParser {
 public:
  static constexpr size_t kMaxHeaderBytes = size_t{64} << 10;  // status line + fields

  HttpResponseParser() { Reset(); }

  // Consumes `bytes`, appending the body bytes they complete to *body. Bytes after the end of the
  // response are ignored. DATA_LOSS on a malformed response; the parser is then unusable.
  Status Feed(std::string_view bytes, std::string* body);
  // The peer closed the connection: OK when the response is complete (a close-delimited body ends
  // here), DATA_LOSS when it was cut short.
  Status FinishAtEof();

  bool headers_done() const { return !failed_ && parser_->is_header_done(); }
  bool done() const { return !failed_ && parser_->is_done(); }
  int status_code() const { return headers_done() ? parser_->get().result_int() : 0; }  // 0 until the header is read
  // A header field's value by name (any case); nullopt if absent.
  std::optional<std::string> Header(std::string_view name) const;

 private:
  using Parser = boost::beast::http::response_parser<boost::beast::http::string_body>;

  void Reset();  // a fresh parser, for the response after an interim 1xx one
  Status Failed(const std::string& what);

  std::optional<Parser> parser_;
  std::string pending_;  // bytes Beast did not consume yet (an incomplete header), given again with more
  bool failed_ = false;
};

}  // namespace tpserve::loadgen
