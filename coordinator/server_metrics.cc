#include "coordinator/server_metrics.h"

namespace tpserve {
namespace {

// vLLM's bucket choices (vllm/v1/metrics/loggers.py), so its dashboards' quantiles read the same.
const std::vector<double> kTimeToFirstTokenBuckets = {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,
                                                      0.25,  0.5,   0.75, 1.0,  2.5,  5.0,  7.5,  10.0,
                                                      20.0,  40.0,  80.0, 160.0, 640.0, 2560.0};
const std::vector<double> kInterTokenBuckets = {0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2,  0.3,  0.4, 0.5,
                                                0.75, 1.0,   2.5,  5.0,   7.5, 10.0, 20.0, 40.0, 80.0};
const std::vector<double> kRequestLatencyBuckets = {0.3,  0.5,  0.8,  1.0,  1.5,   2.0,   2.5,   5.0,   10.0,  15.0, 20.0,
                                                    30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0};
const std::vector<double> kIterationTokenBuckets = {1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384};
// A worker group's step: ~1 ms (a GPU decode step) to seconds (a long CPU prefill).
const std::vector<double> kStepTimeBuckets = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                              0.1,    0.25,  0.5,    1.0,   2.5,  5.0,   10.0};

double Seconds(ServerMetrics::Clock::duration d) { return std::chrono::duration<double>(d).count(); }

}  // namespace

ServerMetrics::ServerMetrics(const std::string& model_name)
    : registry_(MetricLabels{{"model_name", model_name}}),
      num_requests_running_(
          registry_.AddGauge("tpserve:num_requests_running", "Sequences running (holding KV blocks).").Get()),
      num_requests_waiting_(
          registry_.AddGauge("tpserve:num_requests_waiting", "Sequences waiting to be scheduled.").Get()),
      kv_cache_usage_(registry_
                          .AddGauge("tpserve:kv_cache_usage_perc",
                                    "KV-cache usage: blocks in use over all blocks of all worker groups (1 = full).")
                          .Get()),
      prompt_tokens_(registry_.AddCounter("tpserve:prompt_tokens_total", "Prompt tokens of requests that began generating.").Get()),
      generation_tokens_(registry_.AddCounter("tpserve:generation_tokens_total", "Generated tokens.").Get()),
      prefix_cache_queries_(registry_
                                .AddCounter("tpserve:prefix_cache_queries_total",
                                            "Prefix cache queries, in prompt tokens looked up.")
                                .Get()),
      prefix_cache_hits_(registry_
                             .AddCounter("tpserve:prefix_cache_hits_total",
                                         "Prefix cache hits, in prompt tokens served from the cache.")
                             .Get()),
      num_preemptions_(
          registry_.AddCounter("tpserve:num_preemptions_total", "Sequences preempted (recomputed later).").Get()),
      spec_decode_num_drafts_(registry_
                                  .AddCounter("tpserve:spec_decode_num_drafts_total",
                                              "Speculative decoding: sequence-steps that verified proposals.")
                                  .Get()),
      spec_decode_num_draft_tokens_(
          registry_.AddCounter("tpserve:spec_decode_num_draft_tokens_total", "Speculative proposals verified.").Get()),
      spec_decode_num_accepted_tokens_(registry_
                                           .AddCounter("tpserve:spec_decode_num_accepted_tokens_total",
                                                       "Speculative proposals kept as output.")
                                           .Get()),
      request_success_(registry_.AddCounter("tpserve:request_success_total",
                                            "Requests finished, by the finish reason of the sample that ended last.")),
      request_failure_(registry_.AddCounter("tpserve:request_failure_total", "Error replies to requests, by kind.")),
      time_to_first_token_(registry_
                               .AddHistogram("tpserve:time_to_first_token_seconds",
                                             "Time from arrival to the request's first token.", kTimeToFirstTokenBuckets)
                               .Get()),
      inter_token_latency_(registry_
                               .AddHistogram("tpserve:inter_token_latency_seconds",
                                             "Time between two consecutive tokens of a sample.", kInterTokenBuckets)
                               .Get()),
      e2e_request_latency_(registry_
                               .AddHistogram("tpserve:e2e_request_latency_seconds",
                                             "Time from arrival to finish of finished requests.", kRequestLatencyBuckets)
                               .Get()),
      request_queue_time_(registry_
                              .AddHistogram("tpserve:request_queue_time_seconds",
                                            "Time from arrival to the first step that schedules the request.",
                                            kRequestLatencyBuckets)
                              .Get()),
      request_prefill_time_(registry_
                                .AddHistogram("tpserve:request_prefill_time_seconds",
                                              "Time from the first scheduled step to the first token.",
                                              kRequestLatencyBuckets)
                                .Get()),
      request_decode_time_(registry_
                               .AddHistogram("tpserve:request_decode_time_seconds",
                                             "Time from the first token to the finish.", kRequestLatencyBuckets)
                               .Get()),
      iteration_tokens_(registry_
                            .AddHistogram("tpserve:iteration_tokens_total",
                                          "Tokens computed per engine step (prefill and decode).", kIterationTokenBuckets)
                            .Get()),
      worker_step_time_(registry_.AddHistogram("tpserve:worker_step_time_seconds",
                                               "A worker group's time to execute one step, as its leader measures it.",
                                               kStepTimeBuckets)),
      worker_allreduce_time_(registry_.AddHistogram(
          "tpserve:worker_allreduce_time_seconds",
          "The part of a step's time spent in all-reduces (share: rate of its _sum over worker_step_time_seconds_sum).",
          kStepTimeBuckets)),
      num_worker_groups_(registry_.AddGauge("tpserve:num_worker_groups", "Worker groups registered.").Get()) {}

void ServerMetrics::OnArrival(uint64_t request_id, int32_t num_prompt_tokens, Clock::time_point now) {
  RequestClock& clock = requests_[request_id];
  clock.arrival = now;
  clock.num_prompt_tokens = num_prompt_tokens;
}

void ServerMetrics::OnScheduled(const StepPlan& plan, Clock::time_point now) {
  for (const SequencePlan& seq : plan.sequences) {
    auto it = requests_.find(seq.seq_id / kMaxSamplesPerRequest);
    if (it == requests_.end() || it->second.is_scheduled) continue;
    it->second.is_scheduled = true;
    it->second.scheduled = now;
  }
}

void ServerMetrics::OnToken(uint64_t request_id, int32_t sample_index, Clock::time_point now) {
  generation_tokens_.Inc();
  auto it = requests_.find(request_id);
  if (it == requests_.end()) return;
  RequestClock& clock = it->second;
  if (!clock.has_token) {
    clock.has_token = true;
    clock.first_token = now;
    time_to_first_token_.Observe(Seconds(now - clock.arrival));
    prompt_tokens_.Inc(clock.num_prompt_tokens);
  }
  if (static_cast<size_t>(sample_index) >= clock.last_token.size()) {
    clock.last_token.resize(static_cast<size_t>(sample_index) + 1, Clock::time_point{});
  }
  Clock::time_point& last = clock.last_token[static_cast<size_t>(sample_index)];
  if (last != Clock::time_point{}) inter_token_latency_.Observe(Seconds(now - last));
  last = now;
}

void ServerMetrics::OnFinished(uint64_t request_id, FinishReason reason, Clock::time_point now) {
  auto it = requests_.find(request_id);
  if (it == requests_.end()) return;
  const RequestClock& clock = it->second;
  e2e_request_latency_.Observe(Seconds(now - clock.arrival));
  if (clock.is_scheduled) {
    request_queue_time_.Observe(Seconds(clock.scheduled - clock.arrival));
    if (clock.has_token) request_prefill_time_.Observe(Seconds(clock.first_token - clock.scheduled));
  }
  if (clock.has_token) request_decode_time_.Observe(Seconds(now - clock.first_token));
  request_success_.Get({{"finished_reason", FinishReasonName(reason)}}).Inc();
  requests_.erase(it);
}

void ServerMetrics::OnFailed(uint64_t request_id, proto::ErrorKind kind) {
  requests_.erase(request_id);
  request_failure_.Get({{"kind", proto::ErrorKindName(kind)}}).Inc();
}

void ServerMetrics::OnStepResult(uint32_t group_id, const StepPlan& plan, const StepResult& result) {
  int64_t num_tokens = 0;
  for (const SequencePlan& seq : plan.sequences) num_tokens += static_cast<int64_t>(seq.token_ids.size());
  iteration_tokens_.Observe(static_cast<double>(num_tokens));
  const MetricLabels group = {{"group", std::to_string(group_id)}};
  worker_step_time_.Get(group).Observe(result.compute_ms * 1e-3);
  worker_allreduce_time_.Get(group).Observe(result.allreduce_ms * 1e-3);
}

SchedulerStats ServerMetrics::SyncGroup(const WorkerGroupLink& group) {
  const SchedulerStats stats = group.scheduler().Stats();
  GroupCounters& last = group_counters_[group.group_id()];
  num_preemptions_.Inc(static_cast<double>(stats.num_preemptions - last.num_preemptions));
  prefix_cache_queries_.Inc(static_cast<double>(stats.blocks.prefix_query_tokens - last.prefix_query_tokens));
  prefix_cache_hits_.Inc(static_cast<double>(stats.blocks.prefix_hit_tokens - last.prefix_hit_tokens));
  spec_decode_num_drafts_.Inc(static_cast<double>(stats.num_verify_steps - last.num_verify_steps));
  spec_decode_num_draft_tokens_.Inc(static_cast<double>(stats.num_draft_tokens - last.num_draft_tokens));
  spec_decode_num_accepted_tokens_.Inc(static_cast<double>(stats.num_accepted_tokens - last.num_accepted_tokens));
  last = {stats.num_preemptions,  stats.blocks.prefix_query_tokens, stats.blocks.prefix_hit_tokens,
          stats.num_verify_steps, stats.num_draft_tokens,          stats.num_accepted_tokens};
  return stats;
}

void ServerMetrics::OnGroupLost(const WorkerGroupLink& group) {
  SyncGroup(group);
  group_counters_.erase(group.group_id());
}

std::string ServerMetrics::Render(const std::map<uint32_t, std::unique_ptr<WorkerGroupLink>>& groups) {
  int64_t num_running = 0, num_waiting = 0, blocks_used = 0, blocks_total = 0;
  for (const auto& [id, group] : groups) {
    const SchedulerStats stats = SyncGroup(*group);
    num_running += stats.num_running;
    num_waiting += stats.num_waiting;
    blocks_used += stats.blocks.num_used;
    blocks_total += stats.blocks.num_blocks;
  }
  num_requests_running_.Set(static_cast<double>(num_running));
  num_requests_waiting_.Set(static_cast<double>(num_waiting));
  kv_cache_usage_.Set(blocks_total == 0 ? 0.0 : static_cast<double>(blocks_used) / static_cast<double>(blocks_total));
  num_worker_groups_.Set(static_cast<double>(groups.size()));
  return registry_.Render();
}

}  // namespace tpserve
