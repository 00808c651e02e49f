// HttpResponseParser (Boost.Beast's parser behind it) against hand-built responses: each is fed whole, byte by byte, split at every
// position in two, and in seeded random pieces, and must give the hand-written body every time.
#include "bench/loadgen/http_response_parser.h"

#include <gtest/gtest.h>

#include <optional>
#include <random>
#include <string>
#include <vector>

namespace tpserve::loadgen {
namespace {

struct Parsed {
  Status status;
  std::string body;
  int code = 0;
  bool done = false;
};

// Feeds `pieces` in order, then (when eof) the close of the connection.
Parsed FeedPieces(const std::vector<std::string>& pieces, bool eof) {
  HttpResponseParser p;
  Parsed out;
  for (const std::string& piece : pieces) {
    out.status = p.Feed(piece, &out.body);
    if (!out.status.ok()) return out;
  }
  if (eof) out.status = p.FinishAtEof();
  out.code = p.status_code();
  out.done = p.done();
  return out;
}

// Every way of splitting `response` this test uses: whole, bytes, every two-piece split, random pieces.
std::vector<std::vector<std::string>> Splits(const std::string& response) {
  std::vector<std::vector<std::string>> splits = {{response}};
  std::vector<std::string> bytes;
  for (char c : response) bytes.push_back(std::string(1, c));
  splits.push_back(bytes);
  for (size_t i = 0; i <= response.size(); ++i) splits.push_back({response.substr(0, i), response.substr(i)});
  std::mt19937 rng(42);
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<std::string> pieces;
    for (size_t at = 0; at < response.size();) {
      const size_t n = std::uniform_int_distribution<size_t>(1, 7)(rng);
      pieces.push_back(response.substr(at, n));
      at += n;
    }
    splits.push_back(pieces);
  }
  return splits;
}

void ExpectBody(const std::string& response, bool eof, int code, const std::string& body) {
  for (const auto& pieces : Splits(response)) {
    const Parsed p = FeedPieces(pieces, eof);
    ASSERT_TRUE(p.status.ok()) << p.status.ToString() << " in " << pieces.size() << " pieces of " << response;
    EXPECT_EQ(p.code, code);
    EXPECT_EQ(p.body, body) << pieces.size() << " pieces";
    EXPECT_TRUE(p.done);
  }
}

void ExpectError(const std::string& response, bool eof) {
  for (const auto& pieces : Splits(response)) {
    const Parsed p = FeedPieces(pieces, eof);
    EXPECT_EQ(p.status.code(), StatusCode::kDataLoss) << pieces.size() << " pieces of " << response;
  }
}

TEST(HttpResponseParserTest, ChunkedSseBody) {
  // As llama-server streams: chunked, one chunk per event, an extension and a trailer for good measure.
  const std::string response =
      "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
      "18\r\ndata: {\"content\":\"Hi\"}\n\n\r\n"
      "5;ext=1\r\nab\r\nc\r\n"
      "0\r\nX-Trailer: t\r\n\r\n";
  ExpectBody(response, false, 200, "data: {\"content\":\"Hi\"}\n\nab\r\nc");
  HttpResponseParser p;
  std::string body;
  ASSERT_TRUE(p.Feed(response + "HTTP/1.1 200 OK\r\n", &body).ok());  // bytes after the end are ignored
  EXPECT_EQ(p.Header("content-type"), "text/event-stream");
  EXPECT_EQ(p.Header("Content-Type"), "text/event-stream");
  EXPECT_EQ(p.Header("x-missing"), std::nullopt);
}

TEST(HttpResponseParserTest, ContentLengthCloseAndInterim) {
  ExpectBody("HTTP/1.1 503 Service Unavailable\r\ncontent-length:  11 \r\n\r\n{\"e\":\"ld\"}!", false, 503, "{\"e\":\"ld\"}!");
  ExpectBody("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", false, 200, "");
  // No framing: the body runs to the close.
  ExpectBody("HTTP/1.0 200 OK\r\nServer: x\r\n\r\nuntil the end\n", true, 200, "until the end\n");
  ExpectBody("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 404 Not Found\r\nContent-Length: 2\r\n\r\nno", false, 404, "no");
  ExpectBody("HTTP/1.1 204 No Content\r\n\r\n", false, 204, "");
}

TEST(HttpResponseParserTest, MalformedAndCutShort) {
  ExpectError("HTTP/2 200 OK\r\n\r\n", false);
  ExpectError("HTTP/1.1 20x OK\r\n\r\n", false);
  ExpectError("HTTP/1.1 200 OK\r\nNoColon\r\n\r\n", false);
  ExpectError("HTTP/1.1 200 OK\r\nBad Name: v\r\n\r\n", false);
  ExpectError("HTTP/1.1 200 OK\r\nContent-Length: 1x\r\n\r\n", false);
  ExpectError("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", false);
  ExpectError("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabc\r\n0\r\n\r\n", false);  // longer than its size
  ExpectError("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab", true);           // closed inside a chunk
  ExpectError("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", true);                      // closed inside the body
  ExpectError("HTTP/1.1 200 OK\r\nContent-", true);                                            // closed inside the headers
  // An endless header section is refused at the limit, not buffered.
  HttpResponseParser p;
  std::string body;
  ASSERT_TRUE(p.Feed("HTTP/1.1 200 OK\r\n", &body).ok());
  Status status = OkStatus();
  for (int i = 0; i < 10000 && status.ok(); ++i) status = p.Feed("X-Filler: 0123456789\r\n", &body);
  EXPECT_EQ(status.code(), StatusCode::kDataLoss);
  EXPECT_EQ(p.Feed("\r\n", &body).code(), StatusCode::kDataLoss);  // and stays failed
}

}  // namespace
}  // namespace tpserve::loadgen
