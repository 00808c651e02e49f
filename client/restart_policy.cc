#include "client/restart_policy.h"

#include <algorithm>

namespace tpserve {

RestartPolicy::RestartPolicy(std::chrono::milliseconds first, int max_in_a_row, Clock::time_point started)
    : first_(first), max_in_a_row_(max_in_a_row), started_(started) {}

bool RestartPolicy::OnExit(Clock::time_point now) {
  if (now - started_ >= kStableRun) num_in_a_row_ = 0;
  if (++num_in_a_row_ > max_in_a_row_) return false;
  backoff_ = first_;
  for (int i = 1; i < num_in_a_row_ && backoff_ < kMaxBackoff; ++i) backoff_ *= 2;
  backoff_ = std::min(backoff_, std::chrono::milliseconds(kMaxBackoff));
  due_ = now + backoff_;
  return true;
}

void RestartPolicy::OnStart(Clock::time_point now) {
  started_ = now;
  due_ = Clock::time_point::max();
}

}  // namespace tpserve
