// HttpResponseParser: an incremental reader of one HTTP/1.1 response (RFC 9112) as it arrives on a
// socket, for the load generator's llama-server backend: the status line, the header fields, then
// the body, framed by Transfer-Encoding: chunked, by Content-Length, or by the peer closing the
// connection (in that order of precedence). Interim 1xx responses are skipped. Bytes may be split
// anywhere; Feed hands the decoded body bytes over as they complete, so a streamed (SSE) body can
// be read while it is still coming.
//
// Lines may end with CRLF or a bare LF (RFC 9112 §2.2 lets a recipient accept LF). Header names are
// kept lower-cased; a repeated field keeps its last value (the fields this client reads are never
// repeated by llama-server).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "common/status.h"

namespace tpserve::loadgen {

class HttpResponseParser {
 public:
  static constexpr size_t kMaxHeaderBytes = size_t{64} << 10;  // status line + fields
  static constexpr size_t kMaxLineBytes = 4096;                // a chunk-size or trailer line

  // Consumes `bytes`, appending the body bytes they complete to *body. Bytes after the end of the
  // response are ignored. DATA_LOSS on a malformed response; the parser is then unusable.
  Status Feed(std::string_view bytes, std::string* body);
  // The peer closed the connection: OK when the response is complete (a close-delimited body ends
  // here), DATA_LOSS when it was cut short.
  Status FinishAtEof();

  bool headers_done() const { return state_ > State::kHeaders && state_ != State::kFailed; }
  bool done() const { return state_ == State::kDone; }
  int status_code() const { return status_code_; }  // 0 until the status line is read
  // A header field's value (surrounding spaces trimmed) by lower-case name; nullptr if absent.
  const std::string* Header(const std::string& lower_name) const;

 private:
  // Ordered: every state after kHeaders has the headers.
  enum class State {
    kStatusLine, kHeaders, kChunkSize, kChunkData, kChunkDataEnd, kTrailers, kLengthBody, kCloseBody, kDone, kFailed
  };

  Status FeedBytes(std::string_view bytes, std::string* body);
  // Moves one whole line (terminator stripped) from line_ + *bytes into *line; false when the line
  // is not complete yet (its start is kept in line_). DATA_LOSS past the length limits.
  StatusOr<bool> TakeLine(std::string_view* bytes, std::string* line);
  Status OnLine(const std::string& line);  // a line in a line state (status, header, chunk size, ...)
  Status OnStatusLine(const std::string& line);
  Status OnHeaderLine(const std::string& line);
  Status StartBody();
  Status OnChunkSizeLine(const std::string& line);

  State state_ = State::kStatusLine;
  int status_code_ = 0;
  std::map<std::string, std::string> headers_;
  std::string line_;              // a partial line carried over from the previous Feed
  size_t header_bytes_ = 0;
  uint64_t remaining_ = 0;        // bytes left in the current chunk or the Content-Length body
};

}  // namespace tpserve::loadgen
