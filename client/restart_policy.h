// When `tpserve serve` relaunches a child that died on its own (the worker group, the coordinator).
#pragma once

#include <chrono>

namespace tpserve {

// After the k-th exit in a row, wait first * 2^(k-1) (at most kMaxBackoff) before the relaunch; a
// child that ran kStableRun counts as healthy, so its next exit is the first in a row again; past
// max_in_a_row exits in a row, no relaunch. Time is passed in, so the policy is tested without clocks.
class RestartPolicy {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr std::chrono::milliseconds kMaxBackoff{30000};
  static constexpr std::chrono::seconds kStableRun{60};

  // `started`: when the first child was launched.
  RestartPolicy(std::chrono::milliseconds first, int max_in_a_row, Clock::time_point started);

  // The child exited at `now`: true when it is to be relaunched (IsDue once backoff() has passed),
  // false when it has exited more than max_in_a_row times in a row.
  bool OnExit(Clock::time_point now);
  bool IsDue(Clock::time_point now) const { return now >= due_; }
  bool is_pending() const { return due_ != Clock::time_point::max(); }
  // The relaunch happened at `now`.
  void OnStart(Clock::time_point now);
  std::chrono::milliseconds backoff() const { return backoff_; }
  int num_in_a_row() const { return num_in_a_row_; }

 private:
  std::chrono::milliseconds first_;
  int max_in_a_row_;
  int num_in_a_row_ = 0;
  Clock::time_point started_;
  Clock::time_point due_ = Clock::time_point::max();
  std::chrono::milliseconds backoff_{0};
};

}  // namespace tpserve
