// tpserve-bench-nccl: NCCL all-reduce (f32 sum, in place) over every GPU of this host from one
// process (ncclCommInitAll, one stream per GPU), 4 KiB to 64 MiB, with nccl-tests' definitions:
//   time = wall time of one all-reduce on all GPUs (mean of the timed iterations after warm-ups),
//   algbw = bytes / time, busbw = algbw · 2(n − 1) / n.
// With one GPU the all-reduce is a local copy: its latency is the floor of a TP step's collective,
// and busbw is 0 — tensor parallelism over NCCL needs more GPUs.
//
//   tpserve-bench-nccl [--min-bytes 4096] [--max-bytes 67108864] [--json OUT]
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "common/command_line.h"

namespace {

// A failed CUDA or NCCL call ends the benchmark with its file:line and the library's message.
#define BENCH_CUDA(call)                                                                                     \
  do {                                                                                                       \
    const cudaError_t _rc = (call);                                                                          \
    if (_rc != cudaSuccess) {                                                                                \
      std::fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(_rc));    \
      std::exit(1);                                                                                          \
    }                                                                                                        \
  } while (0)
#define BENCH_NCCL(call)                                                                                     \
  do {                                                                                                       \
    const ncclResult_t _rc = (call);                                                                         \
    if (_rc != ncclSuccess) {                                                                                \
      std::fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #call, ncclGetErrorString(_rc));    \
      std::exit(1);                                                                                          \
    }                                                                                                        \
  } while (0)

struct Point {
  size_t bytes = 0;
  double us = 0;
  double algbw_gbs = 0;
  double busbw_gbs = 0;
};

}  // namespace

int main(int argc, char** argv) {
  size_t min_bytes = 4096, max_bytes = size_t{64} << 20;
  std::string json;
  tpserve::CommandLine app("tpserve-bench-nccl: NCCL all-reduce (f32 sum, in place) over every GPU of this host "
                           "from one process, with nccl-tests' algbw and busbw.",
                           "tpserve-bench-nccl");
  app.add_option("--min-bytes", min_bytes, "smallest message")->check(CLI::Range(size_t{4}, size_t{1} << 40))
      ->capture_default_str();
  app.add_option("--max-bytes", max_bytes, "largest message (sizes double from --min-bytes)")
      ->check(CLI::Range(size_t{4}, size_t{1} << 40))->capture_default_str();
  app.add_option("--json", json, "also write the results as JSON here");
  if (std::optional<int> exit_code = app.ParseOrExitCode(argc, argv)) return *exit_code;
  if (max_bytes < min_bytes) {
    std::fprintf(stderr, "tpserve-bench-nccl: --max-bytes must be >= --min-bytes\n");
    return 2;
  }
  int num_gpus = 0;
  BENCH_CUDA(cudaGetDeviceCount(&num_gpus));
  if (num_gpus < 1) {
    std::fprintf(stderr, "tpserve-bench-nccl: no CUDA device is visible\n");
    return 1;
  }
  int nccl_version = 0;
  BENCH_NCCL(ncclGetVersion(&nccl_version));
  std::vector<int> devices(num_gpus);
  for (int d = 0; d < num_gpus; ++d) devices[d] = d;
  std::vector<ncclComm_t> comms(num_gpus);
  BENCH_NCCL(ncclCommInitAll(comms.data(), num_gpus, devices.data()));
  std::vector<cudaStream_t> streams(num_gpus);
  std::vector<float*> buffers(num_gpus);
  for (int d = 0; d < num_gpus; ++d) {
    BENCH_CUDA(cudaSetDevice(d));
    BENCH_CUDA(cudaStreamCreateWithFlags(&streams[d], cudaStreamNonBlocking));
    BENCH_CUDA(cudaMalloc(&buffers[d], max_bytes));
    BENCH_CUDA(cudaMemset(buffers[d], 0, max_bytes));
  }
  auto all_reduce = [&](size_t count) {
    BENCH_NCCL(ncclGroupStart());
    for (int d = 0; d < num_gpus; ++d) {
      BENCH_NCCL(ncclAllReduce(buffers[d], buffers[d], count, ncclFloat, ncclSum, comms[d], streams[d]));
    }
    BENCH_NCCL(ncclGroupEnd());
  };
  auto sync = [&]() {
    for (int d = 0; d < num_gpus; ++d) {
      BENCH_CUDA(cudaSetDevice(d));
      BENCH_CUDA(cudaStreamSynchronize(streams[d]));
    }
  };

  std::printf("NCCL %d, %d GPU(s); all-reduce f32 sum, in place%s\n", nccl_version, num_gpus,
              num_gpus == 1 ? " (one GPU: a local copy; TP > 1 needs more GPUs, busbw is 0)" : "");
  std::printf("%12s %12s %12s %12s\n", "bytes", "time_us", "algbw_GB/s", "busbw_GB/s");
  std::vector<Point> points;
  for (size_t bytes = min_bytes; bytes <= max_bytes; bytes *= 4) {
    const size_t count = bytes / sizeof(float);
    const int warmup = 5, iters = bytes >= (size_t{16} << 20) ? 20 : 100;
    for (int i = 0; i < warmup; ++i) all_reduce(count);
    sync();
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i) all_reduce(count);
    sync();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / iters;
    Point p;
    p.bytes = bytes;
    p.us = seconds * 1e6;
    p.algbw_gbs = bytes / seconds / 1e9;
    p.busbw_gbs = p.algbw_gbs * 2.0 * (num_gpus - 1) / num_gpus;
    std::printf("%12zu %12.2f %12.2f %12.2f\n", p.bytes, p.us, p.algbw_gbs, p.busbw_gbs);
    points.push_back(p);
  }
  if (!json.empty()) {
    std::ofstream out(json);
    out << "{\"nccl_version\": " << nccl_version << ", \"num_gpus\": " << num_gpus << ", \"note\": \""
        << (num_gpus == 1 ? "one GPU: the all-reduce is a local copy; TP > 1 needs more GPUs" : "intra-node")
        << "\", \"points\": [";
    for (size_t i = 0; i < points.size(); ++i) {
      char buf[256];
      std::snprintf(buf, sizeof(buf), "%s\n  {\"bytes\": %zu, \"time_us\": %.3f, \"algbw_gbs\": %.3f, \"busbw_gbs\": %.3f}",
                    i ? "," : "", points[i].bytes, points[i].us, points[i].algbw_gbs, points[i].busbw_gbs);
      out << buf;
    }
    out << "\n]}\n";
    if (!out) {
      std::fprintf(stderr, "tpserve-bench-nccl: cannot write %s\n", json.c_str());
      return 1;
    }
  }
  for (int d = 0; d < num_gpus; ++d) {
    BENCH_CUDA(cudaSetDevice(d));
    BENCH_CUDA(cudaFree(buffers[d]));
    BENCH_CUDA(cudaStreamDestroy(streams[d]));
    BENCH_NCCL(ncclCommDestroy(comms[d]));
  }
  return 0;
}
