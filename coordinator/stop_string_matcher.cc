#include "coordinator/stop_string_matcher.h"

#include <algorithm>

namespace tpserve {

StopStringMatcher::StopStringMatcher(std::vector<std::string> stops) {
  for (std::string& s : stops) {
    if (!s.empty()) stops_.push_back(std::move(s));
  }
}

std::string StopStringMatcher::Push(std::string_view text) {
  if (is_stopped_) return "";
  pending_.append(text);
  // Everything before pending_ was released only when no stop string could start there, so the
  // earliest match lies wholly inside pending_.
  // Of several matches, the one completed first wins (smallest end; then the earliest start),
  // as if the text had arrived byte by byte.
  size_t match = std::string::npos;
  size_t match_end = std::string::npos;
  for (const std::string& stop : stops_) {
    size_t pos = pending_.find(stop);
    if (pos == std::string::npos) continue;
    size_t end = pos + stop.size();
    if (end < match_end || (end == match_end && pos < match)) {
      match = pos;
      match_end = end;
    }
  }
  if (match != std::string::npos) {
    is_stopped_ = true;
    std::string out = pending_.substr(0, match);
    pending_.clear();
    return out;
  }
  // Hold back the longest suffix that is a proper prefix of a stop string.
  size_t hold = 0;
  for (const std::string& stop : stops_) {
    for (size_t len = std::min(stop.size() - 1, pending_.size()); len > hold; --len) {
      if (pending_.compare(pending_.size() - len, len, stop, 0, len) == 0) {
        hold = len;
        break;
      }
    }
  }
  std::string out = pending_.substr(0, pending_.size() - hold);
  pending_.erase(0, pending_.size() - hold);
  return out;
}

std::string StopStringMatcher::Flush() {
  if (is_stopped_) return "";
  std::string out = std::move(pending_);
  pending_.clear();
  return out;
}

}  // namespace tpserve
