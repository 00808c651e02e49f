// The benchmarks' second clock: CPU seconds of the whole process. Divided by the thread count it is
// the time a kernel would take on cores it had to itself, a steadier figure than wall time on a
// shared machine (the "cpu-time basis" of the reports).
#pragma once

#include <ctime>

namespace tpserve::bench {

inline double ProcessCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

}  // namespace tpserve::bench
