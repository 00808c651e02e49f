// The gateway's input: raw bytes as an HTTP/1.1 request through Boost.Beast's parser (the one
// tpserve-http uses, with its body limit), and the body — or the whole input when it is no request —
// through the OpenAI JSON parsers of every route. Never a crash; a parsed request is valid or a 400
// naming a field.
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>

#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <variant>

#include "client/http/openai_request.h"

namespace beast_http = boost::beast::http;

namespace {

void ParseBodies(std::string_view body) {
  for (auto endpoint : {tpserve::http::Endpoint::kCompletions, tpserve::http::Endpoint::kChatCompletions}) {
    tpserve::http::ParsedRequest parsed = tpserve::http::ParseOpenAiRequest(endpoint, body);
    if (const auto* request = std::get_if<tpserve::http::OpenAiRequest>(&parsed)) {
      if (request->prompts.empty()) std::abort();  // a valid request has at least one prompt
    }
  }
  (void)tpserve::http::ParseTokenizeRequest(body);
  (void)tpserve::http::ParseDetokenizeRequest(body);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  beast_http::request_parser<beast_http::string_body> parser;
  parser.body_limit(4u << 20);  // tpserve-http's default --max-body-bytes
  parser.header_limit(16u << 10);
  boost::beast::error_code ec;
  size_t used = 0;
  while (used < bytes.size() && !parser.is_done()) {
    const size_t n = parser.put(boost::asio::buffer(bytes.data() + used, bytes.size() - used), ec);
    if (ec == beast_http::error::need_more) {
      ec = {};
      if (n == 0) break;
    } else if (ec) {
      break;
    }
    used += n;
  }
  if (!ec && parser.is_done()) {
    ParseBodies(parser.get().body());
  } else {
    ParseBodies(bytes);
  }
  return 0;
}
