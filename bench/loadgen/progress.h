// Progress: shows a run's progress on stderr. On a terminal, one bar redrawn in place
// (completed/total, elapsed, output tok/s); otherwise (logs, CI) one line every `every` completions.
#pragma once

#include <cstdint>

namespace tpserve::loadgen {

class Progress {
 public:
  Progress(int64_t total, int64_t every);
  // Called after each completion (ok or not); `now_s` since start, tokens so far.
  void Update(int64_t done, int64_t num_failed, double now_s, int64_t output_tokens);
  void Finish();  // ends the bar's line

 private:
  int64_t total_, every_;
  bool is_tty_;
  bool drew_ = false;
};

}  // namespace tpserve::loadgen
