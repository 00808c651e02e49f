// The benchmarks' two clocks for a kernel called over and over: the median wall time of a call, and
// CPU seconds of the whole process, which divided by the thread count is the time a call would take
// on cores it had to itself, a steadier figure than wall time on a shared machine (the "cpu-time
// basis" of the reports).
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <ctime>
#include <vector>

namespace tpserve::bench {

inline double ProcessCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

struct CallTimes {
  double median_s = 0;      // wall time of the median call
  double cpu_per_call = 0;  // process CPU seconds per call ÷ threads
};

// Calls fn(i) for i = 0, 1, ... until budget_s seconds have passed and at least min_calls ran.
template <class Fn>
CallTimes TimeCalls(double budget_s, int64_t min_calls, int threads, Fn fn) {
  using Clock = std::chrono::steady_clock;
  auto since = [](Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); };
  std::vector<double> times;
  const auto start = Clock::now();
  const double cpu_start = ProcessCpuSeconds();
  int64_t calls = 0;
  while (since(start) < budget_s || calls < min_calls) {
    const auto t0 = Clock::now();
    fn(calls);
    times.push_back(since(t0));
    ++calls;
  }
  std::sort(times.begin(), times.end());
  return {times[times.size() / 2], (ProcessCpuSeconds() - cpu_start) / calls / threads};
}

}  // namespace tpserve::bench
