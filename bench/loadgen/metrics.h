// Metrics: what one benchmark run measured, defined as vLLM's `bench serve` defines them
// (vllm/benchmarks/serve.py, calculate_metrics):
//  - TTFT: send → first token received.  E2E: send → last message received.
//  - TPOT per request: (E2E − TTFT) / (output tokens − 1), only for requests with > 1 token.
//  - ITL: every gap between two consecutive token chunks of a request, pooled over requests.
//  - request throughput = completed / duration; output token throughput = Σ output / duration;
//    total token throughput = Σ (input + output) / duration; duration = run start → last end
//    (times are relative to the run start, as vLLM's benchmark_duration).
//  - goodput: completed requests meeting every given target (TTFT ≤ ttft_ms, TPOT ≤ tpot_ms,
//    E2E ≤ e2e_ms; a request with one token counts TPOT 0) per second.
//  - KV waste (tpserve only, sampled from its Stats during the run): the share of the token slots in
//    used KV blocks that hold no token (the last block of each sequence is partly empty), averaged
//    over the samples weighted by the blocks in use; and the peak share of the blocks in use.
// Percentiles interpolate linearly between order statistics (numpy's default, as vLLM uses).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace tpserve::loadgen {

// One request as the client saw it; times in seconds since the run started.
struct RequestRecord {
  bool ok = false;
  std::string error;           // why it failed, when !ok
  int32_t prompt_len = 0;
  int32_t output_len = 0;      // tokens received
  int32_t cached_prompt_tokens = 0;  // the server's count of prefix-cache hits
  double send_s = 0;
  double first_token_s = -1;   // < 0: no token yet
  double end_s = 0;
  std::vector<double> itl_s;   // [chunks − 1] gaps between token chunks
};

// The server's KV cache at one moment of a run.
struct KvSample {
  int64_t blocks_used = 0, blocks_total = 0;
  double waste = 0;  // of the used blocks' token slots, the share holding no token
};

struct KvSummary {
  int64_t num_samples = 0;
  double waste = 0;             // mean over the samples, weighted by blocks_used
  double peak_used_share = 0;   // max blocks_used / blocks_total
};

KvSummary SummarizeKv(const std::vector<KvSample>& samples);

struct Distribution {
  int64_t count = 0;
  double mean = 0, stddev = 0, median = 0, p90 = 0, p99 = 0, min = 0, max = 0;
};

// Linear-interpolation percentile (q in [0, 100]) of `values`; 0 for none.
double Percentile(std::vector<double> values, double q);
Distribution Distribute(const std::vector<double>& values);

struct GoodputTargets {  // 0: no target on that metric
  double ttft_ms = 0, tpot_ms = 0, e2e_ms = 0;
  bool any() const { return ttft_ms > 0 || tpot_ms > 0 || e2e_ms > 0; }
};

struct Summary {
  int64_t num_completed = 0, num_failed = 0;
  int64_t total_input_tokens = 0, total_output_tokens = 0, total_cached_prompt_tokens = 0;
  double duration_s = 0;
  double request_throughput = 0, output_throughput = 0, total_token_throughput = 0;
  double goodput = -1;  // requests/s; < 0 when no targets were given
  Distribution ttft_ms, tpot_ms, itl_ms, e2e_ms;
  Distribution failed_ms;                  // failed requests that were sent: send to the error (a reject's latency)
  std::map<std::string, int64_t> failures;  // failed requests by the error's kind (its text before ':')
  KvSummary kv;  // num_samples 0: the backend does not report its KV cache
};

Summary Summarize(const std::vector<RequestRecord>& records, const GoodputTargets& targets);

}  // namespace tpserve::loadgen
