#include "worker/group_follower.h"

#include "common/logging.h"

namespace tpserve {

bool IsPlanError(const Status& status) {
  return status.code() == StatusCode::kInvalidArgument || status.code() == StatusCode::kOutOfRange;
}

GroupFollower::GroupFollower(GroupChannel* channel, StepExecutor* local) : channel_(channel), local_(local) {
  CHECK_NE(channel_->control()->rank(), 0);
}

Status GroupFollower::Serve() {
  for (;;) {
    ASSIGN_OR_RETURN(GroupCommand command, channel_->Receive());
    if (std::holds_alternative<ShutdownCommand>(command)) return OkStatus();
    const StepPlan& plan = std::get<StepPlan>(command);
    ++num_steps_;
    StatusOr<StepResult> result = local_->Execute(plan);
    if (result.ok()) continue;
    if (!IsPlanError(result.status())) return result.status();
    LOG(DEBUG) << "rank " << channel_->control()->rank() << ": step " << plan.step_id
               << " refused: " << result.status().ToString();
  }
}

}  // namespace tpserve
