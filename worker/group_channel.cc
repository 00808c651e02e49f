#include "worker/group_channel.h"

#include <string>

#include "comm/plan_codec.h"

namespace tpserve {

Status GroupChannel::SendHeader(Kind kind, uint64_t payload_bytes) {
  CHECK_EQ(control_->rank(), 0);
  uint64_t header[2] = {kind, payload_bytes};
  return control_->Broadcast(header, sizeof(header), 0);
}

Status GroupChannel::SendStep(const StepPlan& plan) {
  if (control_->size() == 1) return OkStatus();
  std::string bytes = EncodeStepPlan(plan);
  RETURN_IF_ERROR(SendHeader(kStep, bytes.size()));
  return control_->Broadcast(bytes.data(), bytes.size(), 0);
}

Status GroupChannel::SendShutdown() {
  if (control_->size() == 1) return OkStatus();
  return SendHeader(kShutdown, 0);
}

StatusOr<GroupCommand> GroupChannel::Receive() {
  CHECK_NE(control_->rank(), 0);
  uint64_t header[2] = {0, 0};
  RETURN_IF_ERROR(control_->BroadcastWaiting(header, sizeof(header), 0, std::nullopt));
  switch (header[0]) {
    case kShutdown:
      return GroupCommand(ShutdownCommand{});
    case kStep: {
      DecodeLimits limits;
      if (header[1] > limits.max_bytes) {
        // The leader sends the payload anyway; we cannot skip a collective, so the group is over.
        return DataLoss("group channel: plan of " + std::to_string(header[1]) + " bytes exceeds the limit");
      }
      std::string bytes(header[1], '\0');
      RETURN_IF_ERROR(control_->Broadcast(bytes.data(), bytes.size(), 0));
      ASSIGN_OR_RETURN(StepPlan plan, DecodeStepPlan(bytes, limits));
      return GroupCommand(std::move(plan));
    }
    default:
      return DataLoss("group channel: unknown command kind " + std::to_string(header[0]));
  }
}

}  // namespace tpserve
