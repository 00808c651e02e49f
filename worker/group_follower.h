// GroupFollower: ranks 1..N-1 of a tensor-parallel group. Serve waits (without spinning) for the
// leader's next command, runs each plan on this rank's executor, and returns when the leader shuts
// the group down.
#pragma once

#include "worker/group_channel.h"
#include "worker/step_executor.h"

namespace tpserve {

// Plan errors every rank detects identically before any collective (the same plan, the same
// validation), so the group stays in step and keeps serving: INVALID_ARGUMENT, OUT_OF_RANGE.
// Anything else on a follower means the group is no longer consistent.
bool IsPlanError(const Status& status);

class GroupFollower {
 public:
  // Both borrowed. REQUIRES: channel->control()->rank() != 0.
  GroupFollower(GroupChannel* channel, StepExecutor* local);

  // OK after the leader's shutdown. An error when the group is broken: the channel's (lost leader,
  // deadline, undecodable command) or a step's error that is not a plan error.
  Status Serve();

  int64_t num_steps() const { return num_steps_; }

 private:
  GroupChannel* channel_;
  StepExecutor* local_;
  int64_t num_steps_ = 0;
};

}  // namespace tpserve
