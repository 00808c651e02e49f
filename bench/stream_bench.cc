// tpserve-bench-stream: STREAM-like copy/scale/add/triad bandwidth with the rank's thread count.
// Usage: tpserve-bench-stream [--mib-per-array N] [--reps N]  (TPSERVE_THREADS sets the threads)
#include <cstdio>
#include <optional>

#include "bench/stream_triad.h"
#include "common/command_line.h"

int main(int argc, char** argv) {
  int64_t mib = 256;
  int reps = 10;
  tpserve::CommandLine app("tpserve-bench-stream: STREAM-like copy/scale/add/triad bandwidth with the rank's thread count "
               "(TPSERVE_THREADS sets the threads).",
               "tpserve-bench-stream");
  app.add_option("--mib-per-array", mib, "size of each of the 3 arrays")->check(CLI::Range(int64_t{1}, int64_t{1} << 20))
      ->capture_default_str();
  app.add_option("--reps", reps, "repetitions (the best is reported)")->check(CLI::Range(1, 1000000))
      ->capture_default_str();
  if (std::optional<int> exit_code = app.ParseOrExitCode(argc, argv)) return *exit_code;
  tpserve::ThreadPool pool(tpserve::ThreadPool::DefaultThreads());
  const int64_t n = mib * (int64_t{1} << 20) / static_cast<int64_t>(sizeof(double));
  std::printf("STREAM-like: 3 arrays of %lld MiB (%lld doubles), %d threads, best of %d\n",
              static_cast<long long>(mib), static_cast<long long>(n), pool.num_threads(), reps);
  tpserve::bench::StreamArrays arrays(n, &pool);
  for (const auto& r : arrays.Run(reps)) std::printf("  %-6s %8.2f GB/s\n", r.name.c_str(), r.best_gbs);
  return 0;
}
