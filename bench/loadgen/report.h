// Report: a run's Summary as vLLM-style text (stdout) and as JSON (--json).
#pragma once

#include <string>

#include "bench/loadgen/metrics.h"
#include "common/json.h"

namespace tpserve::loadgen {

// What was asked for, echoed into the report.
struct RunDescription {
  std::string label, server, dataset, mode;  // mode: "closed" | "static" | "open"
  std::string backend;                       // "tpserve" | "llama-server"
  int32_t num_requests = 0, concurrency = 0, input_len = 0, output_len = 0, shared_prefix_len = 0;
  double request_rate = 0, burstiness = 1, range_ratio = 0;
  uint64_t seed = 0;
  GoodputTargets goodput;
};

std::string FormatReport(const RunDescription& run, const Summary& summary);
JsonValue ReportJson(const RunDescription& run, const Summary& summary);

}  // namespace tpserve::loadgen
