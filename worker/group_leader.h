// GroupLeader: rank 0 of a tensor-parallel group, seen from outside as one StepExecutor. Execute
// broadcasts the plan to the other ranks (GroupChannel), runs rank 0's share, and returns rank 0's
// result (every rank computes the same one). Shutdown tells the followers to exit.
#pragma once

#include "worker/group_channel.h"
#include "worker/step_executor.h"

namespace tpserve {

class GroupLeader : public StepExecutor {
 public:
  // Both borrowed. `local` is rank 0's executor (its ModelExecutor, or a fake in tests).
  // REQUIRES: channel->control()->rank() == 0.
  GroupLeader(GroupChannel* channel, StepExecutor* local);

  // INVALID_ARGUMENT for a structurally invalid plan (nothing is broadcast); otherwise the
  // broadcast's error (the group is then broken) or rank 0's Execute result.
  StatusOr<StepResult> Execute(const StepPlan& plan) override;
  // Sends the followers the shutdown command; later calls do nothing.
  Status Shutdown();

  int tp_size() const { return channel_->control()->size(); }
  // OK while every rank is alive (the group's heartbeat, if any); for a leader idle between steps,
  // which is in no MPI wait that would notice.
  Status CheckRanks() const;
  int64_t num_steps() const { return num_steps_; }

 private:
  GroupChannel* channel_;
  StepExecutor* local_;
  bool is_shut_down_ = false;
  int64_t num_steps_ = 0;
};

}  // namespace tpserve
