#include "bench/loadgen/http_response_parser.h"

#include <algorithm>
#include <cctype>

namespace tpserve::loadgen {

namespace {

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

const std::string* HttpResponseParser::Header(const std::string& lower_name) const {
  auto it = headers_.find(lower_name);
  return it == headers_.end() ? nullptr : &it->second;
}

Status HttpResponseParser::Feed(std::string_view bytes, std::string* body) {
  if (state_ == State::kFailed) return DataLoss("http: the response was already malformed");
  Status status = FeedBytes(bytes, body);
  if (!status.ok()) state_ = State::kFailed;
  return status;
}

Status HttpResponseParser::FeedBytes(std::string_view bytes, std::string* body) {
  while (!bytes.empty() && state_ != State::kDone) {
    switch (state_) {
      case State::kChunkData:
      case State::kLengthBody: {
        const size_t n = static_cast<size_t>(std::min<uint64_t>(remaining_, bytes.size()));
        body->append(bytes.substr(0, n));
        bytes.remove_prefix(n);
        remaining_ -= n;
        if (remaining_ == 0) state_ = state_ == State::kChunkData ? State::kChunkDataEnd : State::kDone;
        break;
      }
      case State::kCloseBody:
        body->append(bytes);
        bytes = {};
        break;
      default: {
        std::string line;
        ASSIGN_OR_RETURN(const bool has_line, TakeLine(&bytes, &line));
        if (!has_line) return OkStatus();
        RETURN_IF_ERROR(OnLine(line));
        break;
      }
    }
  }
  return OkStatus();
}

Status HttpResponseParser::FinishAtEof() {
  if (state_ == State::kCloseBody) state_ = State::kDone;
  if (state_ == State::kDone) return OkStatus();
  const bool in_body = headers_done();
  state_ = State::kFailed;
  return DataLoss(in_body ? "http: connection closed inside the body" : "http: connection closed before the headers ended");
}

StatusOr<bool> HttpResponseParser::TakeLine(std::string_view* bytes, std::string* line) {
  const size_t limit = headers_done() ? kMaxLineBytes : kMaxHeaderBytes - header_bytes_;
  const size_t lf = bytes->find('\n');
  const size_t take = lf == std::string_view::npos ? bytes->size() : lf;
  if (line_.size() + take > limit) return DataLoss("http: header section or chunk line too long");
  line_.append(bytes->substr(0, take));
  if (lf == std::string_view::npos) {
    *bytes = {};
    return false;
  }
  bytes->remove_prefix(lf + 1);
  if (!headers_done()) header_bytes_ += line_.size() + 1;
  if (!line_.empty() && line_.back() == '\r') line_.pop_back();
  *line = std::move(line_);
  line_.clear();
  return true;
}

Status HttpResponseParser::OnLine(const std::string& line) {
  switch (state_) {
    case State::kStatusLine:
      return OnStatusLine(line);
    case State::kHeaders:
      return OnHeaderLine(line);
    case State::kChunkSize:
      return OnChunkSizeLine(line);
    case State::kChunkDataEnd:
      if (!line.empty()) return DataLoss("http: chunk data longer than its size");
      state_ = State::kChunkSize;
      return OkStatus();
    case State::kTrailers:  // trailer fields are read and dropped; an empty line ends the message
      if (line.empty()) state_ = State::kDone;
      return OkStatus();
    default:
      return Internal("http: line in a body state");
  }
}

Status HttpResponseParser::OnStatusLine(const std::string& line) {
  // HTTP-version SP 3DIGIT SP [reason-phrase]; the reason may be missing (and its SP with it).
  const bool ok = line.size() >= 12 && line.compare(0, 7, "HTTP/1.") == 0 && std::isdigit(static_cast<unsigned char>(line[7])) &&
                  line[8] == ' ' && std::all_of(line.begin() + 9, line.begin() + 12, [](char c) { return c >= '0' && c <= '9'; }) &&
                  (line.size() == 12 || line[12] == ' ');
  if (!ok) return DataLoss("http: bad status line '" + line.substr(0, 80) + "'");
  status_code_ = std::stoi(line.substr(9, 3));
  state_ = State::kHeaders;
  return OkStatus();
}

Status HttpResponseParser::OnHeaderLine(const std::string& line) {
  if (line.empty()) {
    if (status_code_ >= 100 && status_code_ < 200 && status_code_ != 101) {  // interim: the real response follows
      headers_.clear();
      status_code_ = 0;
      state_ = State::kStatusLine;
      return OkStatus();
    }
    return StartBody();
  }
  if (line[0] == ' ' || line[0] == '\t') return DataLoss("http: obsolete line folding in the header");
  const size_t colon = line.find(':');
  if (colon == std::string::npos || colon == 0) return DataLoss("http: bad header field '" + line.substr(0, 80) + "'");
  const std::string_view name = std::string_view(line).substr(0, colon);
  if (name.find_first_of(" \t") != std::string_view::npos) return DataLoss("http: space in a header name");
  headers_[Lower(name)] = std::string(Trim(std::string_view(line).substr(colon + 1)));
  return OkStatus();
}

Status HttpResponseParser::StartBody() {
  if (status_code_ == 204 || status_code_ == 304) {
    state_ = State::kDone;
    return OkStatus();
  }
  if (const std::string* te = Header("transfer-encoding")) {
    const std::string codings = Lower(*te);
    const size_t comma = codings.rfind(',');
    const std::string_view last = Trim(std::string_view(codings).substr(comma == std::string::npos ? 0 : comma + 1));
    state_ = last == "chunked" ? State::kChunkSize : State::kCloseBody;  // RFC 9112 §6.3: else read to the close
    return OkStatus();
  }
  if (const std::string* length = Header("content-length")) {
    if (length->empty() || length->size() > 18 || !std::all_of(length->begin(), length->end(), [](char c) { return c >= '0' && c <= '9'; })) {
      return DataLoss("http: bad Content-Length '" + length->substr(0, 40) + "'");
    }
    remaining_ = std::stoull(*length);
    state_ = remaining_ == 0 ? State::kDone : State::kLengthBody;
    return OkStatus();
  }
  state_ = State::kCloseBody;
  return OkStatus();
}

Status HttpResponseParser::OnChunkSizeLine(const std::string& line) {
  std::string_view size = std::string_view(line).substr(0, line.find(';'));  // chunk extensions are ignored
  size = Trim(size);
  if (size.empty() || size.size() > 15 || !std::all_of(size.begin(), size.end(), [](char c) { return std::isxdigit(static_cast<unsigned char>(c)); })) {
    return DataLoss("http: bad chunk size line '" + line.substr(0, 40) + "'");
  }
  remaining_ = std::stoull(std::string(size), nullptr, 16);
  state_ = remaining_ == 0 ? State::kTrailers : State::kChunkData;
  return OkStatus();
}

}  // namespace tpserve::loadgen
