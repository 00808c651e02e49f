// tpserve-bench-allreduce: all-reduce latency and bus bandwidth through MpiCommunicator, for
// 4 KiB .. 64 MiB of floats, printed beside this host's measured memcpy bandwidth (the ceiling for
// ranks that share one host's memory). busbw = algbw x 2(n-1)/n, the nccl-tests definition: the
// bytes each rank must move for a ring all-reduce, so it is comparable across rank counts.
//
// Also measures what the waiting policy costs and saves (--idle): rank 0 computes for a fixed amount
// of work while the other ranks wait in a barrier, once with the backoff wait and once spinning; it
// prints rank 0's compute time and the CPU seconds the waiting ranks burned.
//
//   mpirun -np N tpserve-bench-allreduce [--min-bytes 4096] [--max-bytes 67108864] [--spin]
//       [--spin-us 20] [--max-sleep-us 1000] [--idle]
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include <mpi.h>

#include "comm/mpi_communicator.h"
#include "common/command_line.h"

namespace tpserve {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point since) { return std::chrono::duration<double>(Clock::now() - since).count(); }

double CpuSeconds() {
  rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_utime.tv_sec + usage.ru_stime.tv_sec + 1e-6 * (usage.ru_utime.tv_usec + usage.ru_stime.tv_usec);
}

// Single-thread memcpy bandwidth (read + write bytes per second) over 64 MiB buffers.
double MemcpyBandwidth() {
  const size_t bytes = size_t{64} << 20;
  std::vector<char> a(bytes, 1), b(bytes, 2);
  std::memcpy(b.data(), a.data(), bytes);  // fault the pages in
  double best = 1e30;
  for (int i = 0; i < 5; ++i) {
    const Clock::time_point start = Clock::now();
    std::memcpy(i % 2 ? a.data() : b.data(), i % 2 ? b.data() : a.data(), bytes);
    best = std::min(best, Seconds(start));
  }
  return 2.0 * bytes / best;
}

void Check(const Status& status) {
  if (!status.ok()) {
    std::fprintf(stderr, "allreduce bench: %s\n", status.ToString().c_str());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
}

// Fixed single-thread work that does not touch memory much (so it measures CPU share only).
double Compute(int64_t iterations) {
  double x = 1.0;
  for (int64_t i = 0; i < iterations; ++i) x = x * 1.0000001 + 1e-9;
  return x;
}

void IdleTest(MpiCommunicator& comm) {
  for (bool spin : {false, true}) {
    MpiCommunicatorOptions options;
    options.wait.always_spin = spin;
    auto measured = MpiCommunicator::Create(MPI_COMM_WORLD, options);
    Check(measured.status());
    MpiCommunicator& c = **measured;
    Check(c.Barrier());
    const double cpu_before = CpuSeconds();
    const Clock::time_point start = Clock::now();
    double compute_s = 0;
    volatile double sink = 0;
    for (int round = 0; round < 5; ++round) {
      if (c.rank() == 0) {
        const Clock::time_point t = Clock::now();
        sink = sink + Compute(40'000'000);
        compute_s += Seconds(t);
      }
      Check(c.Barrier());
    }
    const double wall = Seconds(start);
    double cpu = CpuSeconds() - cpu_before;
    std::vector<double> cpus(c.size());
    MPI_Gather(&cpu, 1, MPI_DOUBLE, cpus.data(), 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    if (c.rank() == 0) {
      double waiting_cpu = 0;
      for (int r = 1; r < c.size(); ++r) waiting_cpu += cpus[r];
      std::printf("idle test (%s): rank 0 computed %.3f s of a %.3f s wall; the %d waiting ranks used %.3f CPU s "
                  "(%.0f%% of one core each)\n",
                  spin ? "spin" : "backoff", compute_s, wall, c.size() - 1, waiting_cpu,
                  100.0 * waiting_cpu / std::max(1, c.size() - 1) / wall);
    }
  }
  (void)comm;
}

int Main(int argc, char** argv) {
  size_t min_bytes = 4096, max_bytes = size_t{64} << 20;
  bool spin = false, idle = false, mpi_only = false;
  WaitPolicy policy;
  int64_t spin_us = policy.spin.count(), max_sleep_us = policy.max_sleep.count();
  CommandLine app("tpserve-bench-allreduce: all-reduce latency and bus bandwidth through MpiCommunicator "
               "(run under mpirun -np N), beside this host's memcpy bandwidth.",
               "tpserve-bench-allreduce");
  app.add_option("--min-bytes", min_bytes, "smallest message")->check(CLI::Range(size_t{4}, size_t{1} << 40))
      ->capture_default_str();
  app.add_option("--max-bytes", max_bytes, "largest message (sizes double from --min-bytes)")
      ->check(CLI::Range(size_t{4}, size_t{1} << 40))->capture_default_str();
  app.add_option("--spin-us", spin_us, "backoff wait: spin this long first")->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--max-sleep-us", max_sleep_us, "backoff wait: longest sleep")->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_flag("--spin", spin, "wait by spinning only");
  app.add_flag("--idle", idle, "also measure what waiting ranks burn while rank 0 computes");
  app.add_flag("--mpi-only", mpi_only, "sum through MPI_Iallreduce even where the ranks share a host");
  if (std::optional<int> exit_code = app.ParseOrExitCode(argc, argv)) return *exit_code;
  policy.spin = std::chrono::microseconds(spin_us);
  policy.max_sleep = std::chrono::microseconds(max_sleep_us);
  MpiCommunicatorOptions options;
  options.wait = policy;
  options.wait.always_spin = spin;
  options.deadline = std::chrono::milliseconds(120000);
  if (mpi_only) options.shared_memory_slot_bytes = 0;
  auto created = MpiCommunicator::Create(MPI_COMM_WORLD, options);
  Check(created.status());
  MpiCommunicator& comm = **created;
  const int n = comm.size();
  const double memcpy_bw = MemcpyBandwidth();
  if (comm.rank() == 0) {
    const char* path = comm.shared_memory() ? "shared memory" : "MPI";
    if (spin) {
      std::printf("all-reduce (sum, float32) through %s, %d ranks, wait policy: spin\n", path, n);
    } else {
      std::printf("all-reduce (sum, float32) through %s, %d ranks, wait policy: spin %lld us, then sleeps %lld..%lld us\n",
                  path, n, static_cast<long long>(policy.spin.count()), static_cast<long long>(policy.min_sleep.count()),
                  static_cast<long long>(policy.max_sleep.count()));
    }
    std::printf("memcpy bandwidth measured on rank 0: %.2f GB/s (read+write) -- the one-host ceiling\n",
                memcpy_bw / 1e9);
    std::printf("%12s %8s %12s %12s %12s %12s %10s\n", "bytes", "iters", "median_us", "mean_us", "algbw_GB/s",
                "busbw_GB/s", "busbw/memcpy");
  }
  std::vector<float> data(max_bytes / sizeof(float), 1.0f);  // [max_bytes / 4]
  for (size_t bytes = min_bytes; bytes <= max_bytes; bytes *= 2) {
    const size_t count = bytes / sizeof(float);
    const int iters = static_cast<int>(std::clamp<size_t>((size_t{512} << 20) / bytes, 5, 200));
    for (int w = 0; w < 3; ++w) Check(comm.AllReduceSum(data.data(), count));
    Check(comm.Barrier());
    // Per-iteration times: the median resists the descheduling noise of a shared machine; the
    // bandwidth columns use it too. Each iteration's time is the slowest rank's.
    std::vector<double> times(iters);
    for (int i = 0; i < iters; ++i) {
      const Clock::time_point start = Clock::now();
      Check(comm.AllReduceSum(data.data(), count));
      times[i] = Seconds(start);
    }
    MPI_Allreduce(MPI_IN_PLACE, times.data(), iters, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    double mean = 0;
    for (double t : times) mean += t / iters;
    std::sort(times.begin(), times.end());
    const double seconds = times[iters / 2];
    if (comm.rank() == 0) {
      const double algbw = bytes / seconds;
      const double busbw = algbw * 2.0 * (n - 1) / n;
      std::printf("%12zu %8d %12.1f %12.1f %12.3f %12.3f %10.3f\n", bytes, iters, seconds * 1e6, mean * 1e6,
                  algbw / 1e9, busbw / 1e9, busbw / memcpy_bw);
    }
    std::fill(data.begin(), data.begin() + count, 1.0f);  // keep values finite
  }
  if (idle) IdleTest(comm);
  return 0;
}

}  // namespace
}  // namespace tpserve

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  const int rc = tpserve::Main(argc, argv);
  MPI_Finalize();
  return rc;
}
