#include "worker/group_runtime.h"

#include "common/logging.h"
#include "worker/group_channel.h"
#include "worker/group_follower.h"

namespace tpserve {

Status RunGroup(const MakeExecutorFunction& make_executor, const LeadFunction& lead,
                const GroupRuntimeOptions& options) {
  ASSIGN_OR_RETURN(std::unique_ptr<MpiCommunicator> model_comm,
                   MpiCommunicator::Create(MPI_COMM_WORLD, options.collectives));
  ASSIGN_OR_RETURN(std::unique_ptr<MpiCommunicator> control, MpiCommunicator::Create(MPI_COMM_WORLD, options.control));
  const int rank = control->rank();

  StatusOr<std::unique_ptr<StepExecutor>> local = make_executor(model_comm.get());
  // Agree before serving: a rank that failed to load would leave the others waiting in their
  // first collective until the deadline.
  int64_t failed_rank[1] = {local.ok() ? -1 : rank};
  RETURN_IF_ERROR(control->AllReduceMaxInt64(failed_rank, 1));
  if (!local.ok()) return local.status();
  if (failed_rank[0] >= 0) {
    return FailedPrecondition("rank " + std::to_string(failed_rank[0]) + " failed to load its shard");
  }

  GroupChannel channel(control.get());
  if (rank != 0) {
    GroupFollower follower(&channel, local->get());
    Status served = follower.Serve();
    LOG(DEBUG) << "rank " << rank << ": served " << follower.num_steps() << " steps: " << served.ToString();
    return served;
  }
  GroupLeader leader(&channel, local->get());
  RETURN_IF_ERROR(lead(leader));
  return leader.Shutdown();
}

}  // namespace tpserve
