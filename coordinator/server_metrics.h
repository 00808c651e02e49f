// ServerMetrics: tpserve's Prometheus metrics, named after vLLM's (`tpserve:` for `vllm:`, the
// same model_name label on every series) so its dashboards carry over. The Server feeds it at
// the points where request state changes; it keeps the per-request clocks it needs.
//
// A request's life, as the Server reports it (times are the Server's steady clock):
//   OnArrival (accepted and queued) → OnScheduled (in a plan for the first time: queue end; each
//   plan reports all its sequences, only the first counts) → OnToken per sampled token →
//   OnFinished (every sample finished: stop, length or cancelled) | OnFailed (an error reply).
// Observed at the first token: time_to_first_token_seconds, prompt_tokens_total; at each later
// token of a sample: inter_token_latency_seconds (since that sample's previous token); at
// OnFinished, as vLLM does: e2e_request_latency_seconds (arrival → finish),
// request_queue_time_seconds (arrival → first scheduled), request_prefill_time_seconds (first
// scheduled → first token), request_decode_time_seconds (first token → finish), the last three
// only for phases the request reached; request_success_total{finished_reason}.
// So N requests that finish with at least one token count N in every request histogram.
// Failures (request_failure_total{kind}) count every error reply a client gets for a request,
// whether it was refused at once (invalid_request, overloaded, unavailable, ...) or failed later
// (worker_lost, internal); a failed request observes no latency histogram.
//
// Gauges and the counters the Schedulers keep (preemptions, prefix cache) are read at Render.
// Not thread-safe: the Server's loop owns it.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "comm/client_codec.h"
#include "comm/step_plan.h"
#include "coordinator/metrics.h"
#include "coordinator/sequence.h"
#include "coordinator/worker_group_link.h"

namespace tpserve {

class ServerMetrics {
 public:
  using Clock = std::chrono::steady_clock;

  explicit ServerMetrics(const std::string& model_name);

  // --- requests (ids are the Server's request ids) ---
  void OnArrival(uint64_t request_id, int32_t num_prompt_tokens, Clock::time_point now);
  // Every sequence of a plan just sent.
  void OnScheduled(const StepPlan& plan, Clock::time_point now);
  void OnToken(uint64_t request_id, int32_t sample_index, Clock::time_point now);
  void OnFinished(uint64_t request_id, FinishReason reason, Clock::time_point now);
  // An error reply for a request: request_id 0 when it was refused before it was accepted.
  void OnFailed(uint64_t request_id, proto::ErrorKind kind);

  // --- steps ---
  // A step of `group_id` came back: iteration_tokens_total, the group's step and all-reduce time.
  void OnStepResult(uint32_t group_id, const StepPlan& plan, const StepResult& result);

  // The group is about to be forgotten: its scheduler counters' last increments are counted.
  void OnGroupLost(const WorkerGroupLink& group);

  // Reads the gauges and scheduler counters from the groups, then renders the exposition text.
  std::string Render(const std::map<uint32_t, std::unique_ptr<WorkerGroupLink>>& groups);

  // Requests whose clocks are kept (arrived, not yet finished or failed): for tests.
  size_t num_tracked_requests() const { return requests_.size(); }

 private:
  struct RequestClock {
    Clock::time_point arrival;
    Clock::time_point scheduled;    // valid when is_scheduled
    Clock::time_point first_token;  // valid when has_token
    bool is_scheduled = false;
    bool has_token = false;
    int32_t num_prompt_tokens = 0;
    std::vector<Clock::time_point> last_token;  // [samples seen], epoch until the sample's first token
  };
  // Counters the Schedulers keep per group, last values seen (a group's counters restart with it).
  struct GroupCounters {
    int64_t num_preemptions = 0;
    int64_t prefix_query_tokens = 0;
    int64_t prefix_hit_tokens = 0;
    int64_t num_verify_steps = 0;
    int64_t num_draft_tokens = 0;
    int64_t num_accepted_tokens = 0;
  };

  // Adds what the group's scheduler counted since the last call; returns its stats.
  SchedulerStats SyncGroup(const WorkerGroupLink& group);

  MetricsRegistry registry_;
  Gauge& num_requests_running_;
  Gauge& num_requests_waiting_;
  Gauge& kv_cache_usage_;
  Counter& prompt_tokens_;
  Counter& generation_tokens_;
  Counter& prefix_cache_queries_;
  Counter& prefix_cache_hits_;
  Counter& num_preemptions_;
  Counter& spec_decode_num_drafts_;
  Counter& spec_decode_num_draft_tokens_;
  Counter& spec_decode_num_accepted_tokens_;
  MetricFamily<Counter>& request_success_;
  MetricFamily<Counter>& request_failure_;
  Histogram& time_to_first_token_;
  Histogram& inter_token_latency_;
  Histogram& e2e_request_latency_;
  Histogram& request_queue_time_;
  Histogram& request_prefill_time_;
  Histogram& request_decode_time_;
  Histogram& iteration_tokens_;
  MetricFamily<Histogram>& worker_step_time_;
  MetricFamily<Histogram>& worker_allreduce_time_;
  Gauge& num_worker_groups_;

  std::unordered_map<uint64_t, RequestClock> requests_;
  std::map<uint32_t, GroupCounters> group_counters_;
};

}  // namespace tpserve
