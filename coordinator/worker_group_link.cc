#include "coordinator/worker_group_link.h"

#include <algorithm>

namespace tpserve {
namespace {

SchedulerConfig ForGroup(SchedulerConfig config, const HelloMessage& hello) {
  if (hello.max_model_len > 0) config.max_model_len = std::min(config.max_model_len, hello.max_model_len);
  config.has_draft_model = hello.draft_model.has_value();
  return config;
}

}  // namespace

WorkerGroupLink::WorkerGroupLink(uint32_t group_id, std::string routing_id, const HelloMessage& hello,
                                 const SchedulerConfig& config)
    : group_id_(group_id),
      routing_id_(std::move(routing_id)),
      hello_(hello),
      scheduler_(std::make_unique<Scheduler>(ForGroup(config, hello), hello.num_blocks, hello.block_size,
                                             hello.kv_groups)),
      last_seen_(Clock::now()),
      last_heartbeat_sent_(Clock::now()) {}

void WorkerGroupLink::SetInFlight(StepPlan plan, Clock::time_point now) {
  in_flight_ = std::move(plan);
  step_sent_ = now;
}

StepPlan WorkerGroupLink::TakeInFlight() {
  StepPlan plan = std::move(*in_flight_);
  in_flight_.reset();
  return plan;
}

bool WorkerGroupLink::IsLost(Clock::time_point now, std::chrono::milliseconds step_timeout,
                             std::chrono::milliseconds heartbeat_timeout) const {
  if (now - last_seen_ > heartbeat_timeout) return true;
  return in_flight_ && now - step_sent_ > step_timeout;
}

}  // namespace tpserve
