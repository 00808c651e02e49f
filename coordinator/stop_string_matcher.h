// StopStringMatcher: cuts a sample's streamed text at the first stop string, and releases text only
// once it is final: text that could still be the start of a stop string is held back until the
// next piece decides it (OpenAI/vLLM semantics: the output ends right before the stop string, and
// nothing already sent is ever retracted).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace tpserve {

class StopStringMatcher {
 public:
  // Empty strings in `stops` are ignored.
  explicit StopStringMatcher(std::vector<std::string> stops);

  // Appends `text` (the decoder's new final text) and returns the part that is now final.
  // After a match, stopped() is true, the returned text ends right before the stop string and
  // every later Push returns "".
  std::string Push(std::string_view text);
  // The held-back text, at the end of generation (no stop string can complete any more).
  std::string Flush();
  bool stopped() const { return is_stopped_; }

 private:
  std::vector<std::string> stops_;
  std::string pending_;  // held back: a suffix that is a proper prefix of some stop string
  bool is_stopped_ = false;
};

}  // namespace tpserve
