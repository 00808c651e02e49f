#include "bench/loadgen/report.h"

#include <cmath>
#include <cstdio>

namespace tpserve::loadgen {

namespace {

std::string Line(const char* name, double value, const char* fmt = "%.2f") {
  char v[64], out[160];
  std::snprintf(v, sizeof(v), fmt, value);
  std::snprintf(out, sizeof(out), "%-40s %12s\n", name, v);
  return out;
}

std::string Section(const char* title, const char* key, const Distribution& d) {
  std::string out = std::string("---------------") + title + std::string(std::max<int>(0, 36 - int(std::string(title).size())), '-') + "\n";
  char name[64];
  const std::pair<const char*, double> rows[] = {{"Mean", d.mean}, {"Median", d.median}, {"P90", d.p90}, {"P99", d.p99}};
  for (const auto& [what, value] : rows) {
    std::snprintf(name, sizeof(name), "%s %s (ms):", what, key);
    out += Line(name, value);
  }
  return out;
}

JsonValue DistJson(const Distribution& d) {
  JsonValue o = JsonValue::Object();
  o.Set("count", JsonValue::Int(d.count));
  o.Set("mean", JsonValue::Number(d.mean));
  o.Set("std", JsonValue::Number(d.stddev));
  o.Set("median", JsonValue::Number(d.median));
  o.Set("p90", JsonValue::Number(d.p90));
  o.Set("p99", JsonValue::Number(d.p99));
  o.Set("min", JsonValue::Number(d.min));
  o.Set("max", JsonValue::Number(d.max));
  return o;
}

double Finite(double v) { return std::isfinite(v) ? v : -1; }  // JSON has no Infinity

}  // namespace

std::string FormatReport(const RunDescription& run, const Summary& s) {
  std::string out = "============ Serving Benchmark Result ============\n";
  if (!run.label.empty()) out += "Label: " + run.label + "\n";
  if (!run.backend.empty()) out += "Backend: " + run.backend + " (" + run.server + ")\n";
  char mode[160];
  if (run.mode == "open") {
    std::snprintf(mode, sizeof(mode), "Mode: open loop, %.3g req/s, burstiness %.3g\n", run.request_rate, run.burstiness);
  } else {
    std::snprintf(mode, sizeof(mode), "Mode: %s, concurrency %d\n",
                  run.mode == "static" ? "static batches (client-side)" : "closed loop", run.concurrency);
  }
  out += mode;
  out += Line("Successful requests:", s.num_completed, "%.0f");
  out += Line("Failed requests:", s.num_failed, "%.0f");
  out += Line("Benchmark duration (s):", s.duration_s);
  out += Line("Total input tokens:", s.total_input_tokens, "%.0f");
  out += Line("Total generated tokens:", s.total_output_tokens, "%.0f");
  out += Line("Prompt tokens from prefix cache:", s.total_cached_prompt_tokens, "%.0f");
  out += Line("Request throughput (req/s):", s.request_throughput);
  if (s.goodput >= 0) out += Line("Request goodput (req/s):", s.goodput);
  out += Line("Output token throughput (tok/s):", s.output_throughput);
  out += Line("Total token throughput (tok/s):", s.total_token_throughput);
  if (s.kv.num_samples > 0) {
    out += Line("KV waste, share of used slots (mean):", s.kv.waste, "%.4f");
    out += Line("KV blocks in use, peak share:", s.kv.peak_used_share, "%.4f");
  }
  out += Section("Time to First Token", "TTFT", s.ttft_ms);
  out += Section("Time per Output Token (excl. 1st token)", "TPOT", s.tpot_ms);
  out += Section("Inter-token Latency", "ITL", s.itl_ms);
  out += Section("End-to-end Latency", "E2EL", s.e2e_ms);
  if (!s.failures.empty()) {
    out += "---------------Failed requests by kind----------------\n";
    for (const auto& [kind, count] : s.failures) out += Line((kind + ":").c_str(), count, "%.0f");
    if (s.failed_ms.count > 0) out += Section("Failure latency (send to error)", "failure", s.failed_ms);
  }
  out += "==================================================\n";
  return out;
}

JsonValue ReportJson(const RunDescription& run, const Summary& s) {
  JsonValue o = JsonValue::Object();
  o.Set("label", JsonValue::String(run.label));
  o.Set("server", JsonValue::String(run.server));
  o.Set("backend", JsonValue::String(run.backend));
  o.Set("dataset", JsonValue::String(run.dataset));
  o.Set("mode", JsonValue::String(run.mode));
  o.Set("num_requests", JsonValue::Int(run.num_requests));
  o.Set("concurrency", JsonValue::Int(run.concurrency));
  o.Set("request_rate", JsonValue::Number(Finite(run.request_rate)));
  o.Set("burstiness", JsonValue::Number(run.burstiness));
  o.Set("input_len", JsonValue::Int(run.input_len));
  o.Set("output_len", JsonValue::Int(run.output_len));
  o.Set("range_ratio", JsonValue::Number(run.range_ratio));
  o.Set("shared_prefix_len", JsonValue::Int(run.shared_prefix_len));
  o.Set("seed", JsonValue::Int(static_cast<int64_t>(run.seed)));
  o.Set("goodput_ttft_ms", JsonValue::Number(run.goodput.ttft_ms));
  o.Set("goodput_tpot_ms", JsonValue::Number(run.goodput.tpot_ms));
  o.Set("goodput_e2e_ms", JsonValue::Number(run.goodput.e2e_ms));
  o.Set("completed", JsonValue::Int(s.num_completed));
  o.Set("failed", JsonValue::Int(s.num_failed));
  o.Set("duration_s", JsonValue::Number(s.duration_s));
  o.Set("total_input_tokens", JsonValue::Int(s.total_input_tokens));
  o.Set("total_output_tokens", JsonValue::Int(s.total_output_tokens));
  o.Set("cached_prompt_tokens", JsonValue::Int(s.total_cached_prompt_tokens));
  o.Set("request_throughput", JsonValue::Number(s.request_throughput));
  o.Set("output_throughput", JsonValue::Number(s.output_throughput));
  o.Set("total_token_throughput", JsonValue::Number(s.total_token_throughput));
  if (s.goodput >= 0) o.Set("request_goodput", JsonValue::Number(s.goodput));
  o.Set("ttft_ms", DistJson(s.ttft_ms));
  o.Set("tpot_ms", DistJson(s.tpot_ms));
  o.Set("itl_ms", DistJson(s.itl_ms));
  o.Set("e2e_ms", DistJson(s.e2e_ms));
  o.Set("failed_ms", DistJson(s.failed_ms));
  JsonValue failures = JsonValue::Object();
  for (const auto& [kind, count] : s.failures) failures.Set(kind, JsonValue::Int(count));
  o.Set("failures", std::move(failures));
  if (s.kv.num_samples > 0) {
    o.Set("kv_samples", JsonValue::Int(s.kv.num_samples));
    o.Set("kv_waste", JsonValue::Number(s.kv.waste));
    o.Set("kv_used_peak_share", JsonValue::Number(s.kv.peak_used_share));
  }
  return o;
}

}  // namespace tpserve::loadgen
