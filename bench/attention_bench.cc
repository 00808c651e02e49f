// tpserve-bench-attention: PagedAttention alone, decode (one query token per sequence) over a
// context of N cached positions: GB/s of K and V read, beside this machine's STREAM triad, for
// the head shapes of SmolLM2-135M (9 query / 3 KV heads) and a Llama-3.2-1B (32 / 8), D = 64,
// and every KV cache type. The cache spans several copies so the reads come from memory, as in a
// forward pass where the other layers evicted this one's cache. With --prefill N each sequence's last N
// positions are queried at once, as a prefill chunk of N tokens (N = the context: a whole causal prompt),
// and the figure is GFLOP/s of q·k and weights·v.
// Usage: tpserve-bench-attention [--quick] [--context N ...] [--batch B] [--prefill N]
//                                [--kv-dtype f32|f16|bf16|q8_0]
// (TPSERVE_THREADS sets the threads)
#include <algorithm>
#include <cstdio>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "bench/cache_size.h"
#include "bench/cpu_time.h"
#include "bench/stream_triad.h"
#include "common/command_line.h"
#include "common/dtype.h"
#include "common/thread_pool.h"
#include "kernels/cpu/paged_attention.h"

namespace tpserve {
namespace {

constexpr int64_t kBlockSize = 16;
constexpr int64_t kHeadDim = 64;

struct Shape {
  const char* name;
  int64_t heads, kv_heads;
};

// One layer's cache for `batch` sequences of `context` positions each, in `copies` copies.
struct Cache {
  std::vector<std::vector<uint8_t>> k, v;
  std::vector<int32_t> block_tables;
  int64_t blocks_per_seq = 0;
};

Cache MakeCache(const Shape& s, DType type, int64_t batch, int64_t context, int64_t copies) {
  Cache c;
  c.blocks_per_seq = (context + kBlockSize - 1) / kBlockSize;
  const int64_t num_blocks = batch * c.blocks_per_seq;
  const int64_t bytes = num_blocks * kBlockSize * s.kv_heads * DTypeRowBytes(type, kHeadDim);
  std::mt19937 rng(1);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> row(kHeadDim);
  std::vector<uint8_t> one(bytes);
  const int64_t row_bytes = DTypeRowBytes(type, kHeadDim);
  for (int64_t off = 0; off < bytes; off += row_bytes) {
    for (float& x : row) x = dist(rng);
    QuantizeRow(type, row.data(), one.data() + off, kHeadDim);
  }
  c.k.assign(copies, one);
  c.v.assign(copies, one);
  // Sequence b owns blocks b, b + batch, b + 2 batch, ...: interleaved, as a busy pool hands them out.
  c.block_tables.resize(batch * c.blocks_per_seq);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t i = 0; i < c.blocks_per_seq; ++i) c.block_tables[b * c.blocks_per_seq + i] = i * batch + b;
  return c;
}

void BenchOne(const Shape& s, DType type, int64_t batch, int64_t context, int64_t queries, double triad_gbs,
              bool quick, ThreadPool* pool) {
  const int64_t kv_bytes = 2 * batch * context * s.kv_heads * DTypeRowBytes(type, kHeadDim);
  const int64_t copies = std::max<int64_t>(1, bench::BytesPastCache(int64_t{quick ? 64 : 128} << 20) / kv_bytes + 1);
  Cache cache = MakeCache(s, type, batch, context, copies);
  std::mt19937 rng(2);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  const int64_t tokens = batch * queries;
  std::vector<float> q(tokens * s.heads * kHeadDim), out(q.size());
  for (float& x : q) x = dist(rng);
  // Sequence b's tokens, in order, at its last `queries` positions; flops: q·k and weights·v of each key.
  std::vector<int32_t> token_seq(tokens), positions(tokens), kv_head_of_q(s.heads);
  double flops = 0;
  for (int64_t t = 0; t < tokens; ++t) {
    token_seq[t] = static_cast<int32_t>(t / queries);
    positions[t] = static_cast<int32_t>(context - queries + t % queries);
    flops += 4.0 * kHeadDim * s.heads * (positions[t] + 1);
  }
  for (int64_t h = 0; h < s.heads; ++h) kv_head_of_q[h] = static_cast<int32_t>(h / (s.heads / s.kv_heads));

  PagedAttentionArgs a;
  a.q = q.data();
  a.token_seq = token_seq.data();
  a.positions = positions.data();
  a.block_tables = cache.block_tables.data();
  a.kv_head_of_q = kv_head_of_q.data();
  a.max_blocks_per_seq = cache.blocks_per_seq;
  a.num_tokens = tokens;
  a.num_heads = s.heads;
  a.num_kv_heads = s.kv_heads;
  a.head_dim = kHeadDim;
  a.block_size = kBlockSize;
  a.scale = 0.125f;
  a.kv_dtype = type;
  a.out = out.data();

  const bench::CallTimes times =
      bench::TimeCalls(quick ? 0.2 : 0.5, 2 * copies, pool->num_threads(), [&](int64_t call) {
        a.k_cache = cache.k[call % copies].data();
        a.v_cache = cache.v[call % copies].data();
        PagedAttention(a, pool);
      });
  const double median = times.median_s, cpu_per_call = times.cpu_per_call;
  const double gbs = kv_bytes / median / 1e9;
  if (queries > 1) {
    std::printf("  %-7s B=%-3lld ctx=%-6lld prefill %-5lld %-5s %9.1f us  %7.1f GFLOP/s  [cpu-time basis %7.1f]\n",
                s.name, static_cast<long long>(batch), static_cast<long long>(context),
                static_cast<long long>(queries), DTypeName(type), median * 1e6, flops / median / 1e9,
                flops / cpu_per_call / 1e9);
    return;
  }
  std::printf("  %-7s B=%-3lld ctx=%-6lld %-5s %9.1f us  KV read %6.2f GB/s of %6.2f GB/s triad (%3.0f%%)"
              "  [cpu-time basis %6.2f GB/s]\n",
              s.name, static_cast<long long>(batch), static_cast<long long>(context), DTypeName(type), median * 1e6,
              gbs, triad_gbs, 100.0 * gbs / triad_gbs, kv_bytes / cpu_per_call / 1e9);
}

}  // namespace
}  // namespace tpserve

int main(int argc, char** argv) {
  using namespace tpserve;
  bool quick = false;
  std::vector<int64_t> contexts{512, 4096};
  int64_t batch = 1, queries = 1;
  std::string type_name;
  CommandLine app("tpserve-bench-attention: PagedAttention decode over a cached context, GB/s of KV read beside "
                  "this machine's STREAM triad. TPSERVE_THREADS sets the threads.",
                  "tpserve-bench-attention");
  app.add_flag("--quick", quick, "fewer repetitions");
  app.add_option("--context", contexts, "cached positions per sequence: 512,4096")
      ->delimiter(',')
      ->capture_default_str();
  app.add_option("--batch", batch, "decoding sequences")->check(CLI::Range(1, 4096))->capture_default_str();
  app.add_option("--prefill", queries, "query each sequence's last N positions at once (GFLOP/s)")
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--kv-dtype", type_name, "only this KV cache type: f32 f16 bf16 q8_0");
  if (std::optional<int> exit_code = app.ParseOrExitCode(argc, argv)) return *exit_code;
  std::vector<DType> types{DType::kF32, DType::kF16, DType::kBF16, DType::kQ8_0};
  if (!type_name.empty()) {
    DType t;
    if (!ParseDType(type_name, &t) || std::find(types.begin(), types.end(), t) == types.end()) {
      std::fprintf(stderr, "tpserve-bench-attention: --kv-dtype must be f32, f16, bf16 or q8_0\n");
      return 2;
    }
    types = {t};
  }
  for (int64_t c : contexts) {
    if (c < queries) {
      std::fprintf(stderr, "tpserve-bench-attention: --context must be at least --prefill (and positive)\n");
      return 2;
    }
  }
  ThreadPool pool(ThreadPool::DefaultThreads(), ThreadPool::DefaultPollMicros());  // the engine's hand-off
  const double triad = bench::MeasureTriadGbs(&pool, quick ? 3 : 5);
  std::printf("threads %d: STREAM triad %.2f GB/s\n", pool.num_threads(), triad);
  const Shape shapes[] = {{"smollm2", 9, 3}, {"1b", 32, 8}};
  for (const Shape& s : shapes)
    for (int64_t c : contexts)
      for (DType t : types) BenchOne(s, t, batch, c, queries, triad, quick, &pool);
  return 0;
}
