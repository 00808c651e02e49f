// GroupChannel: how the leader (rank 0) of a tensor-parallel group hands commands to the other
// ranks over MPI. Each command is a fixed 16-byte header {kind, payload bytes} broadcast from
// rank 0, then (for a step) the Cap'n Proto bytes of the StepPlan (comm/plan_codec.h).
//
// Followers wait for the next header with no deadline but without spinning (MpiCommunicator's
// backoff); everything after a header is bounded by the communicator's deadline, so a leader that
// dies mid-command cannot hang its followers.
#pragma once

#include <cstdint>
#include <variant>

#include "comm/mpi_communicator.h"
#include "comm/step_plan.h"
#include "common/status.h"

namespace tpserve {

struct ShutdownCommand {};
using GroupCommand = std::variant<StepPlan, ShutdownCommand>;

class GroupChannel {
 public:
  // `control` is borrowed; it should be a communicator used for nothing else (commands must not
  // interleave with the model's collectives).
  explicit GroupChannel(MpiCommunicator* control) : control_(control) {}

  // Leader side. REQUIRES: control->rank() == 0.
  Status SendStep(const StepPlan& plan);
  Status SendShutdown();

  // Follower side: blocks (backing off) until the leader's next command. UNAVAILABLE /
  // DEADLINE_EXCEEDED when the group is broken, DATA_LOSS / INVALID_ARGUMENT on undecodable plans.
  // REQUIRES: control->rank() != 0.
  StatusOr<GroupCommand> Receive();

  MpiCommunicator* control() const { return control_; }

 private:
  enum Kind : uint64_t { kStep = 1, kShutdown = 2 };
  Status SendHeader(Kind kind, uint64_t payload_bytes);

  MpiCommunicator* control_;
};

}  // namespace tpserve
