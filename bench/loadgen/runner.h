// Runner: drives one benchmark through a LoadBackend (tpserve or llama-server) and records what the
// client saw of each request (RequestRecord). Single-threaded: sends when the load shape says so,
// otherwise waits in LoadBackend::Receive, so time stamps are taken as messages arrive.
//
// Modes:
//  - kClosed: keep `concurrency` requests in flight; a new one starts as soon as one ends.
//  - kStatic: static batching emulated client-side: send `concurrency` requests, wait for all of
//    them, then the next batch (the same requests and total work as kClosed).
//  - kOpen: send request i at arrival_s[i] (seconds after the start) whatever is in flight.
// Every request is sent as token ids with max_tokens = output_len and ignore_eos (exact lengths),
// greedy, streamed. A request's output tokens are the sum of its token events, replaced by the
// server's own total when its finish reports one.
#pragma once

#include <cstdint>
#include <vector>

#include "bench/loadgen/dataset.h"
#include "bench/loadgen/load_backend.h"
#include "bench/loadgen/metrics.h"
#include "common/status.h"

namespace tpserve::loadgen {

enum class LoadMode { kClosed, kStatic, kOpen };

struct RunOptions {
  LoadMode mode = LoadMode::kClosed;
  int32_t concurrency = 1;         // kClosed, kStatic
  std::vector<double> arrival_s;   // kOpen: [num_requests], non-decreasing
  double max_duration_s = 600;     // past it, in-flight requests are cancelled and count as failed
  int64_t progress_every = 10;     // progress line period when stderr is not a terminal
  double kv_sample_period_s = 1;   // LoadBackend::SampleKv while requests are in flight (until UNIMPLEMENTED)
};

struct LoadResult {
  std::vector<RequestRecord> records;  // one per request, in dataset order
  std::vector<KvSample> kv_samples;    // empty when the backend does not report its KV cache
};

// An error of the connection itself (not of a request) ends the run with that Status.
StatusOr<LoadResult> RunLoad(LoadBackend* backend, const std::vector<BenchRequest>& requests, const RunOptions& options);

}  // namespace tpserve::loadgen
