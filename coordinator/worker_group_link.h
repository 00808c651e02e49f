// WorkerGroupLink: the coordinator's side of one registered worker group (one mpirun job, its
// leader connected to the worker endpoint): the group's Hello, its own Scheduler (each group has
// its own KV cache), the plan in flight and the liveness clocks.
//
// Liveness: a group is lost when nothing (its leader's beats, heartbeat echoes, results) came from
// it within the heartbeat timeout — the leader beats from a thread of its own, also during a step
// (worker/group_session_beat.h) — or when a step has been in flight longer than the step timeout.
// The Server owns the socket; this class keeps state and decides.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "comm/worker_message.h"
#include "coordinator/scheduler.h"

namespace tpserve {

class WorkerGroupLink {
 public:
  using Clock = std::chrono::steady_clock;

  WorkerGroupLink(uint32_t group_id, std::string routing_id, const HelloMessage& hello,
                  const SchedulerConfig& config);

  uint32_t group_id() const { return group_id_; }
  const std::string& routing_id() const { return routing_id_; }
  const HelloMessage& hello() const { return hello_; }
  Scheduler& scheduler() { return *scheduler_; }
  const Scheduler& scheduler() const { return *scheduler_; }

  // Sequences queued or running: the "least loaded" measure.
  int32_t load() const { return scheduler_->num_waiting() + scheduler_->num_running(); }

  bool has_step_in_flight() const { return in_flight_.has_value(); }
  const StepPlan& in_flight() const { return *in_flight_; }
  void SetInFlight(StepPlan plan, Clock::time_point now);
  StepPlan TakeInFlight();

  void MarkSeen(Clock::time_point now) { last_seen_ = now; }
  // Whether the group is to be considered lost at `now`.
  bool IsLost(Clock::time_point now, std::chrono::milliseconds step_timeout,
              std::chrono::milliseconds heartbeat_timeout) const;
  Clock::time_point last_heartbeat_sent() const { return last_heartbeat_sent_; }
  void MarkHeartbeatSent(Clock::time_point now) { last_heartbeat_sent_ = now; }
  uint64_t NextHeartbeatSequence() { return ++heartbeat_sequence_; }

 private:
  uint32_t group_id_;
  std::string routing_id_;
  HelloMessage hello_;
  std::unique_ptr<Scheduler> scheduler_;
  std::optional<StepPlan> in_flight_;
  Clock::time_point step_sent_;
  Clock::time_point last_seen_;
  Clock::time_point last_heartbeat_sent_;
  uint64_t heartbeat_sequence_ = 0;
};

}  // namespace tpserve
