// tpserve-bench-stream: STREAM-like copy/scale/add/triad bandwidth with the rank's thread count.
// Usage: tpserve-bench-stream [--mib-per-array N] [--reps N]  (TPSERVE_THREADS sets the threads)
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "bench/stream_triad.h"

int main(int argc, char** argv) {
  int64_t mib = 256;
  int reps = 10;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--mib-per-array") == 0) mib = std::atoll(argv[i + 1]);
    else if (std::strcmp(argv[i], "--reps") == 0) reps = std::atoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "usage: %s [--mib-per-array N] [--reps N]\n", argv[0]);
      return 2;
    }
  }
  if (mib <= 0 || reps <= 0) {
    std::fprintf(stderr, "--mib-per-array and --reps must be positive\n");
    return 2;
  }
  tpserve::ThreadPool pool(tpserve::ThreadPool::DefaultThreads());
  const int64_t n = mib * (int64_t{1} << 20) / static_cast<int64_t>(sizeof(double));
  std::printf("STREAM-like: 3 arrays of %lld MiB (%lld doubles), %d threads, best of %d\n",
              static_cast<long long>(mib), static_cast<long long>(n), pool.num_threads(), reps);
  tpserve::bench::StreamArrays arrays(n, &pool);
  for (const auto& r : arrays.Run(reps)) std::printf("  %-6s %8.2f GB/s\n", r.name.c_str(), r.best_gbs);
  return 0;
}
