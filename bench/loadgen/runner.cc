#include "bench/loadgen/runner.h"

#include <algorithm>
#include <chrono>
#include <thread>
#include <unordered_map>

#include "bench/loadgen/progress.h"
#include "common/check.h"

namespace tpserve::loadgen {

namespace {

using Clock = std::chrono::steady_clock;

struct InFlight {
  size_t index;
  double last_chunk_s = -1;
};

}  // namespace

StatusOr<LoadResult> RunLoad(LoadBackend* backend, const std::vector<BenchRequest>& requests, const RunOptions& options) {
  CHECK(options.mode != LoadMode::kOpen || options.arrival_s.size() == requests.size());
  CHECK(options.mode == LoadMode::kOpen || options.concurrency > 0);
  const size_t n = requests.size();
  LoadResult result;
  std::vector<RequestRecord>& records = result.records;
  records.resize(n);
  bool can_sample_kv = true;
  double next_kv_sample_s = 0;
  for (size_t i = 0; i < n; ++i) records[i].prompt_len = static_cast<int32_t>(requests[i].prompt_ids.size());
  std::unordered_map<uint64_t, InFlight> in_flight;
  size_t next = 0;
  int64_t num_done = 0, num_failed = 0, output_tokens = 0;
  Progress progress(static_cast<int64_t>(n), options.progress_every);
  const Clock::time_point start = Clock::now();
  auto now_s = [&] { return std::chrono::duration<double>(Clock::now() - start).count(); };

  auto send = [&]() -> Status {
    RequestRecord& rec = records[next];
    rec.send_s = now_s();
    StatusOr<uint64_t> id = backend->Start(requests[next]);
    if (!id.ok()) return id.status();
    in_flight.emplace(*id, InFlight{next, -1});
    ++next;
    return OkStatus();
  };
  auto end = [&](uint64_t id, bool ok, std::string error) {
    RequestRecord& rec = records[in_flight.at(id).index];
    rec.ok = ok;
    rec.error = std::move(error);
    rec.end_s = now_s();
    in_flight.erase(id);
    ++num_done;
    num_failed += ok ? 0 : 1;
    progress.Update(num_done, num_failed, rec.end_s, output_tokens);
  };

  while (static_cast<size_t>(num_done) < n) {
    const double t = now_s();
    if (t > options.max_duration_s) {  // bounded in time: give up on the rest
      std::vector<uint64_t> ids;
      for (const auto& [id, f] : in_flight) ids.push_back(id);
      for (uint64_t id : ids) {
        backend->Cancel(id);
        end(id, false, "time limit reached");
      }
      for (; next < n; ++next) {
        records[next].error = "not sent: time limit reached";
        ++num_done;
        ++num_failed;
      }
      break;
    }
    if (can_sample_kv && !in_flight.empty() && t >= next_kv_sample_s) {
      StatusOr<KvSample> kv = backend->SampleKv();
      if (kv.ok()) result.kv_samples.push_back(*kv);
      can_sample_kv = kv.status().code() != StatusCode::kUnimplemented;
      next_kv_sample_s = t + options.kv_sample_period_s;
    }
    double wait_s = 0.1;
    if (options.mode == LoadMode::kClosed) {
      while (in_flight.size() < static_cast<size_t>(options.concurrency) && next < n) RETURN_IF_ERROR(send());
    } else if (options.mode == LoadMode::kStatic) {
      if (in_flight.empty()) {
        for (int32_t b = 0; b < options.concurrency && next < n; ++b) RETURN_IF_ERROR(send());
      }
    } else {
      while (next < n && options.arrival_s[next] <= t) RETURN_IF_ERROR(send());
      if (next < n) wait_s = std::clamp(options.arrival_s[next] - now_s(), 0.0, 0.1);
    }
    if (in_flight.empty()) {  // open loop, nothing out yet: sleep until the next arrival
      if (wait_s > 0) std::this_thread::sleep_for(std::chrono::duration<double>(wait_s));
      continue;
    }
    StatusOr<BackendEvent> event =
        backend->Receive(std::chrono::milliseconds(std::max<int64_t>(1, static_cast<int64_t>(wait_s * 1e3))));
    if (!event.ok()) {
      if (event.status().code() == StatusCode::kDeadlineExceeded) continue;
      progress.Finish();
      return event.status();
    }
    auto it = in_flight.find(event->request_id);
    if (it == in_flight.end()) continue;  // a request we already gave up on
    RequestRecord& rec = records[it->second.index];
    switch (event->kind) {
      case BackendEvent::Kind::kTokens: {
        const double at = now_s();
        if (rec.first_token_s < 0) {
          rec.first_token_s = at;
        } else {
          rec.itl_s.push_back(at - it->second.last_chunk_s);
        }
        it->second.last_chunk_s = at;
        rec.output_len += event->num_tokens;
        output_tokens += event->num_tokens;
        break;
      }
      case BackendEvent::Kind::kFinish:
        if (event->reported_output_tokens >= 0) {  // the server's count is the one that stands
          output_tokens += event->reported_output_tokens - rec.output_len;
          rec.output_len = event->reported_output_tokens;
        }
        rec.cached_prompt_tokens = event->cached_prompt_tokens;
        end(event->request_id, true, "");
        break;
      case BackendEvent::Kind::kError:
        end(event->request_id, false, event->error);
        break;
    }
  }
  progress.Finish();
  return result;
}

}  // namespace tpserve::loadgen
