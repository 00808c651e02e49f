#include "bench/loadgen/sse_parser.h"

namespace tpserve::loadgen {

namespace {
constexpr std::string_view kBom = "\xEF\xBB\xBF";
}  // namespace

Status SseParser::Feed(std::string_view bytes, std::vector<SseEvent>* events) {
  for (char c : bytes) {
    if (at_start_) {  // strip a leading BOM, byte by byte (it may be split across feeds too)
      if (line_.size() < kBom.size() && c == kBom[line_.size()]) {
        line_.push_back(c);
        if (line_.size() == kBom.size()) {
          line_.clear();
          at_start_ = false;
        }
        continue;
      }
      at_start_ = false;  // no BOM: what was held back is ordinary text
    }
    if (c == '\n' && after_cr_) {  // the LF of a CRLF whose CR ended the line already
      after_cr_ = false;
      continue;
    }
    after_cr_ = c == '\r';
    if (c == '\r' || c == '\n') {
      ProcessLine(events);
      line_.clear();
      continue;
    }
    line_.push_back(c);
    if (line_.size() + data_.size() > kMaxEventBytes) {
      return ResourceExhausted("SSE event longer than " + std::to_string(kMaxEventBytes) + " bytes");
    }
  }
  return OkStatus();
}

void SseParser::ProcessLine(std::vector<SseEvent>* events) {
  if (line_.empty()) {  // dispatch
    if (has_data_) {
      data_.pop_back();  // the '\n' after the last data line
      events->push_back(SseEvent{type_.empty() ? "message" : std::move(type_), std::move(data_), last_id_});
    }
    type_.clear();
    data_.clear();
    has_data_ = false;
    return;
  }
  if (line_[0] == ':') return;  // comment
  const size_t colon = line_.find(':');
  const std::string_view line(line_);
  const std::string_view field = line.substr(0, colon);
  std::string_view value = colon == std::string::npos ? std::string_view() : line.substr(colon + 1);
  if (!value.empty() && value[0] == ' ') value.remove_prefix(1);
  if (field == "data") {
    data_.append(value);
    data_.push_back('\n');
    has_data_ = true;
  } else if (field == "event") {
    type_ = value;
  } else if (field == "id") {
    if (value.find('\0') == std::string_view::npos) last_id_ = value;
  }
}

}  // namespace tpserve::loadgen
