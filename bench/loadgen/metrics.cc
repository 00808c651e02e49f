#include "bench/loadgen/metrics.h"

#include <algorithm>
#include <cmath>

namespace tpserve::loadgen {

double Percentile(std::vector<double> values, double q) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const double rank = q / 100.0 * static_cast<double>(values.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(rank));
  const size_t hi = std::min(lo + 1, values.size() - 1);
  return values[lo] + (values[hi] - values[lo]) * (rank - static_cast<double>(lo));
}

Distribution Distribute(const std::vector<double>& values) {
  Distribution d;
  d.count = static_cast<int64_t>(values.size());
  if (values.empty()) return d;
  double sum = 0;
  for (double v : values) sum += v;
  d.mean = sum / static_cast<double>(values.size());
  double sq = 0;
  for (double v : values) sq += (v - d.mean) * (v - d.mean);
  d.stddev = std::sqrt(sq / static_cast<double>(values.size()));  // population, as np.std
  d.median = Percentile(values, 50);
  d.p90 = Percentile(values, 90);
  d.p99 = Percentile(values, 99);
  d.min = *std::min_element(values.begin(), values.end());
  d.max = *std::max_element(values.begin(), values.end());
  return d;
}

Summary Summarize(const std::vector<RequestRecord>& records, const GoodputTargets& targets) {
  Summary s;
  std::vector<double> ttft, tpot, itl, e2e, failed;  // milliseconds
  double last_end = 0;
  int64_t num_good = 0;
  for (const RequestRecord& r : records) {
    if (!r.ok) {
      ++s.num_failed;
      ++s.failures[r.error.substr(0, r.error.find(':'))];
      if (r.end_s > 0) failed.push_back((r.end_s - r.send_s) * 1e3);
      continue;
    }
    ++s.num_completed;
    last_end = std::max(last_end, r.end_s);
    s.total_input_tokens += r.prompt_len;
    s.total_output_tokens += r.output_len;
    s.total_cached_prompt_tokens += r.cached_prompt_tokens;
    const double first = r.first_token_s >= 0 ? r.first_token_s : r.end_s;
    const double ttft_ms = (first - r.send_s) * 1e3, e2e_ms = (r.end_s - r.send_s) * 1e3;
    ttft.push_back(ttft_ms);
    e2e.push_back(e2e_ms);
    double tpot_ms = 0;
    if (r.output_len > 1) {
      tpot_ms = (e2e_ms - ttft_ms) / (r.output_len - 1);
      tpot.push_back(tpot_ms);
    }
    for (double gap : r.itl_s) itl.push_back(gap * 1e3);
    const bool good = (targets.ttft_ms <= 0 || ttft_ms <= targets.ttft_ms) &&
                      (targets.tpot_ms <= 0 || tpot_ms <= targets.tpot_ms) &&
                      (targets.e2e_ms <= 0 || e2e_ms <= targets.e2e_ms);
    num_good += good ? 1 : 0;
  }
  if (s.num_completed > 0) s.duration_s = last_end;
  if (s.duration_s > 0) {
    s.request_throughput = s.num_completed / s.duration_s;
    s.output_throughput = s.total_output_tokens / s.duration_s;
    s.total_token_throughput = (s.total_input_tokens + s.total_output_tokens) / s.duration_s;
    if (targets.any()) s.goodput = num_good / s.duration_s;
  } else if (targets.any()) {
    s.goodput = 0;
  }
  s.ttft_ms = Distribute(ttft);
  s.tpot_ms = Distribute(tpot);
  s.itl_ms = Distribute(itl);
  s.e2e_ms = Distribute(e2e);
  s.failed_ms = Distribute(failed);
  return s;
}

KvSummary SummarizeKv(const std::vector<KvSample>& samples) {
  KvSummary kv;
  double weighted = 0, used = 0;
  for (const KvSample& s : samples) {
    ++kv.num_samples;
    weighted += s.waste * static_cast<double>(s.blocks_used);
    used += static_cast<double>(s.blocks_used);
    if (s.blocks_total > 0) kv.peak_used_share = std::max(kv.peak_used_share, double(s.blocks_used) / double(s.blocks_total));
  }
  kv.waste = used > 0 ? weighted / used : 0;
  return kv;
}

}  // namespace tpserve::loadgen
