#include "worker/group_leader.h"

#include "comm/plan_codec.h"

namespace tpserve {

GroupLeader::GroupLeader(GroupChannel* channel, StepExecutor* local) : channel_(channel), local_(local) {
  CHECK_EQ(channel_->control()->rank(), 0);
}

StatusOr<StepResult> GroupLeader::Execute(const StepPlan& plan) {
  CHECK(!is_shut_down_) << "Execute after Shutdown";
  // Followers reject what fails validation when they decode it; check first so that no rank runs
  // a plan another rank refuses.
  RETURN_IF_ERROR(ValidateStepPlan(plan));
  RETURN_IF_ERROR(channel_->SendStep(plan));
  ++num_steps_;
  return local_->Execute(plan);
}

Status GroupLeader::CheckRanks() const {
  const PeerLiveness* liveness = channel_->control()->options().wait.liveness;
  return liveness != nullptr ? liveness->Check() : OkStatus();
}

Status GroupLeader::Shutdown() {
  if (is_shut_down_) return OkStatus();
  is_shut_down_ = true;
  return channel_->SendShutdown();
}

}  // namespace tpserve
