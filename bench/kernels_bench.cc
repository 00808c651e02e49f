// tpserve-bench-kernels: MatMul throughput per weight type, decode (T=1, memory bound: GB/s of
// weight streamed) and prefill (T=512, compute bound: GFLOP/s), next to this machine's limits
// measured here: STREAM triad bandwidth and the F32 FMA peak of a register-only loop.
// Weights are cycled through enough copies to exceed the last-level cache, as in a real forward
// pass where each layer's weights were evicted by the others; decode also runs on one copy (in cache).
// Usage: tpserve-bench-kernels [--quick] [--type f32|f16|bf16|q8_0|q4_0|q4_1|q5_0|...|q6_k]
//        [--shape small|large|head|all]
// A K-quant runs the transposed shape where the rows are not whole 256-value super-blocks (576 columns:
// SmolLM2's ffn_down, 1536 x 576, as llama-quantize would have it).
// (TPSERVE_THREADS sets the threads)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "bench/cache_size.h"
#include "bench/cpu_time.h"
#include "bench/stream_triad.h"
#include "common/command_line.h"
#include "common/dtype.h"
#include "common/thread_pool.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/matmul_fixed_point.h"
#include "model/huge_page_arena.h"

#if defined(__AVX512F__) || defined(__FMA__)
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>
#endif

namespace tpserve {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// F32 FMA peak: independent register-resident FMA chains on every thread. *cpu_basis gets the
// same on the process-CPU-time basis.
double MeasureFmaPeakGflops(ThreadPool* pool, double* cpu_basis) {
  constexpr int64_t kIters = 20'000'000;
  std::vector<float> sink(pool->num_threads() * 16);
  double best = 1e30, best_cpu = 1e30;
  for (int rep = 0; rep < 3; ++rep) {
    const auto t0 = Clock::now();
    const double cpu0 = bench::ProcessCpuSeconds();
    pool->ParallelFor(pool->num_threads(), [&](int64_t begin, int64_t end) {
      for (int64_t th = begin; th < end; ++th) {
#if defined(__AVX512F__)
        __m512 acc[12];
        for (int i = 0; i < 12; ++i) acc[i] = _mm512_set1_ps(static_cast<float>(i));
        const __m512 m = _mm512_set1_ps(0.999999f), a = _mm512_set1_ps(1e-7f);
        for (int64_t it = 0; it < kIters / 4; ++it)
          for (int i = 0; i < 12; ++i) acc[i] = _mm512_fmadd_ps(acc[i], m, a);
        for (int i = 1; i < 12; ++i) acc[0] = _mm512_add_ps(acc[0], acc[i]);
        _mm512_storeu_ps(&sink[th * 16], acc[0]);
#elif defined(__FMA__)
        __m256 acc[12];
        for (int i = 0; i < 12; ++i) acc[i] = _mm256_set1_ps(static_cast<float>(i));
        const __m256 m = _mm256_set1_ps(0.999999f), a = _mm256_set1_ps(1e-7f);
        for (int64_t it = 0; it < kIters / 4; ++it)
          for (int i = 0; i < 12; ++i) acc[i] = _mm256_fmadd_ps(acc[i], m, a);
        for (int i = 1; i < 12; ++i) acc[0] = _mm256_add_ps(acc[0], acc[i]);
        _mm256_storeu_ps(&sink[th * 16], acc[0]);
#else
        float acc[12];
        for (int i = 0; i < 12; ++i) acc[i] = static_cast<float>(i);
        for (int64_t it = 0; it < kIters / 4; ++it)
          for (int i = 0; i < 12; ++i) acc[i] = acc[i] * 0.999999f + 1e-7f;
        sink[th * 16] = acc[0];
#endif
      }
    });
    best = std::min(best, Seconds(t0));
    best_cpu = std::min(best_cpu, (bench::ProcessCpuSeconds() - cpu0) / pool->num_threads());
  }
#if defined(__AVX512F__)
  const double lanes = 16;
#elif defined(__FMA__)
  const double lanes = 8;
#else
  const double lanes = 1;
#endif
  const double flops = pool->num_threads() * (kIters / 4) * 12.0 * lanes * 2.0;
  *cpu_basis = flops / best_cpu / 1e9;
  return flops / best / 1e9;
}

struct Case {
  int64_t cols, rows;  // x [T, cols] · Wᵀ, W [rows, cols]
};

void BenchType(DType type, const Case& c, double triad_gbs, double peak_gflops, bool quick, ThreadPool* pool) {
  const int64_t row_bytes = DTypeRowBytes(type, c.cols);
  const int64_t weight_bytes = row_bytes * c.rows;
  std::mt19937 rng(1);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> src(c.cols);
  std::vector<uint8_t> one(weight_bytes);
  for (int64_t r = 0; r < c.rows; ++r) {
    for (float& v : src) v = dist(rng);
    QuantizeRow(type, src.data(), one.data() + r * row_bytes, c.cols);
  }
  const int64_t cycled = bench::BytesPastCache(int64_t{quick ? 96 : 192} << 20);
  const int64_t copies = std::max<int64_t>(1, cycled / weight_bytes + 1);
  // In 2 MiB pages, as the engine holds a model's weights (model/huge_page_arena.h).
  HugePageArena arena;
  std::vector<std::shared_ptr<uint8_t>> weights;
  for (int64_t i = 0; i < copies; ++i) {
    weights.push_back(arena.Allocate(weight_bytes));
    std::memcpy(weights.back().get(), one.data(), weight_bytes);
  }

  const int64_t max_tokens = quick ? 128 : 512;
  std::vector<float> x(max_tokens * c.cols), y(max_tokens * c.rows);
  for (float& v : x) v = dist(rng);

  // Decode: one token, a different copy of the weight each call, through the float sums and then the
  // fixed-point sums (the row-parallel layers: attention output, FFN down).
  std::vector<int64_t> y_fixed(max_tokens * c.rows);
  const auto print_decode = [&](const char* sums, auto multiply) {
    const auto decode = [&](int64_t copy) { multiply(WeightMatrix{type, c.rows, c.cols, weights[copy].get()}); };
    const bench::CallTimes times = bench::TimeCalls(quick ? 0.2 : 0.5, 2 * copies, pool->num_threads(),
                                                    [&](int64_t call) { decode(call % copies); });
    const double median = times.median_s, cpu_per_call = times.cpu_per_call;
    const double gbs = weight_bytes / median / 1e9;
    std::printf("  decode  T=1   %-5s %5lldx%-5lld %-11s %9.1f us  achieved %6.2f GB/s of %6.2f GB/s measured "
                "(%3.0f%%)  [cpu-time basis %6.2f GB/s]\n",
                DTypeName(type), static_cast<long long>(c.cols), static_cast<long long>(c.rows), sums, median * 1e6,
                gbs, triad_gbs, 100.0 * gbs / triad_gbs, weight_bytes / cpu_per_call / 1e9);
    // The same call on one copy, which stays in cache: the arithmetic alone. Where a core's memory wait and
    // its arithmetic do not overlap, the call from memory takes about the sum (bench/README.md, "AVX-512
    // attention, one core's bound").
    const double cached =
        bench::TimeCalls(quick ? 0.1 : 0.25, 8, pool->num_threads(), [&](int64_t) { decode(0); }).median_s;
    std::printf("%46s in cache %9.1f us  (%6.2f GB/s; from memory: the arithmetic + %.1f us)\n", "",
                cached * 1e6, weight_bytes / cached / 1e9, (median - cached) * 1e6);
  };
  print_decode("float", [&](const WeightMatrix& w) { MatMul(w, x.data(), 1, y.data(), pool); });
  print_decode("fixed-point", [&](const WeightMatrix& w) { MatMulFixedPoint(w, x.data(), 1, y_fixed.data(), pool); });

  // Prefill: T tokens through one weight copy, best of 3, through the float sums and then the fixed-point
  // sums (the row-parallel layers: attention output, FFN down).
  const auto best_of_3 = [&](auto multiply) {
    double best = 1e30, best_cpu = 1e30;
    for (int rep = 0; rep < 3; ++rep) {
      const WeightMatrix w{type, c.rows, c.cols, weights[rep % copies].get()};
      const auto t0 = Clock::now();
      const double cpu0 = bench::ProcessCpuSeconds();
      multiply(w);
      best = std::min(best, Seconds(t0));
      best_cpu = std::min(best_cpu, (bench::ProcessCpuSeconds() - cpu0) / pool->num_threads());
    }
    return std::pair{best, best_cpu};
  };
  const double flops = 2.0 * c.rows * c.cols * max_tokens;
  const auto print_prefill = [&](const char* sums, std::pair<double, double> times) {
    const auto [seconds, cpu_seconds] = times;
    const double gflops = flops / seconds / 1e9;
    std::printf("  prefill T=%-3lld %-5s %5lldx%-5lld %-11s %9.1f ms  achieved %6.1f GFLOP/s of %6.1f GFLOP/s measured "
                "F32 FMA peak (%3.0f%%)  [cpu-time basis %6.1f GFLOP/s]\n",
                static_cast<long long>(max_tokens), DTypeName(type), static_cast<long long>(c.cols),
                static_cast<long long>(c.rows), sums, seconds * 1e3, gflops, peak_gflops,
                100.0 * gflops / peak_gflops, flops / cpu_seconds / 1e9);
  };
  print_prefill("float", best_of_3([&](const WeightMatrix& w) { MatMul(w, x.data(), max_tokens, y.data(), pool); }));
  print_prefill("fixed-point", best_of_3([&](const WeightMatrix& w) {
                  MatMulFixedPoint(w, x.data(), max_tokens, y_fixed.data(), pool);
                }));
}

}  // namespace
}  // namespace tpserve

int main(int argc, char** argv) {
  using namespace tpserve;
  bool quick = false;
  std::string type_name, shape = "all";
  CommandLine app("tpserve-bench-kernels: MatMul throughput per weight type, decode (GB/s) and prefill (GFLOP/s), "
               "beside this machine's STREAM triad and FMA peak. TPSERVE_THREADS sets the threads.",
               "tpserve-bench-kernels");
  app.add_flag("--quick", quick, "fewer repetitions");
  app.add_option("--type", type_name, "only this weight type: f32 f16 bf16 q8_0 q4_0 q4_1 q5_0 q5_1 q2_k q3_k q4_k "
                 "q5_k q6_k");
  app.add_option("--shape", shape, "small (SmolLM2's FFN), large (the 1B model's FFN), head (SmolLM2's output "
                 "projection: 576 x 49152) or all")
      ->check(CLI::IsMember({"small", "large", "head", "all"}))
      ->capture_default_str();
  if (std::optional<int> exit_code = app.ParseOrExitCode(argc, argv)) return *exit_code;
  DType only_type = DType::kF32;
  const bool has_type = !type_name.empty();
  if (has_type && !ParseDType(type_name, &only_type)) {
    std::fprintf(stderr, "tpserve-bench-kernels: unknown --type %s\n", type_name.c_str());
    return 2;
  }
  ThreadPool pool(ThreadPool::DefaultThreads(), ThreadPool::DefaultPollMicros());  // the engine's hand-off
  const double triad = bench::MeasureTriadGbs(&pool, quick ? 3 : 5);
  double peak_cpu = 0;
  const double peak = MeasureFmaPeakGflops(&pool, &peak_cpu);
  std::printf("threads %d: STREAM triad %.2f GB/s, F32 FMA peak %.1f GFLOP/s (register-only loop; %.1f on the "
              "cpu-time basis)\n",
              pool.num_threads(), triad, peak, peak_cpu);
  std::printf("[cpu-time basis]: work / (process CPU seconds / threads), the rate with the cores to itself;\n"
              "wall-clock figures on a shared machine include time spent descheduled.\n");
  // SmolLM2's FFN up and down shapes (small), the 1B synthetic model's (large), SmolLM2's output projection,
  // its tied token embedding (head: many short rows).
  struct Shape {
    const char* name;
    Case c;
  };
  const Shape cases[] = {{"small", {576, 1536}}, {"small", {1536, 576}}, {"large", {2048, 8192}},
                         {"large", {8192, 2048}}, {"head", {576, 49152}}};
  for (const auto& [name, c] : cases) {
    if (shape != "all" && shape != name) continue;
    for (DType t : kSupportedDTypes) {
      if (has_type && t != only_type) continue;
      BenchType(t, c.cols % DTypeBlockElems(t) == 0 ? c : Case{c.rows, c.cols}, triad, peak, quick, &pool);
    }
  }
  return 0;
}
