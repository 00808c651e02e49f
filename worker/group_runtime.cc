#include "worker/group_runtime.h"

#include "common/logging.h"
#include "worker/group_channel.h"
#include "worker/group_follower.h"

namespace tpserve {

Status RunGroup(const MakeExecutorFunction& make_executor, const LeadFunction& lead,
                GroupRuntimeOptions options) {
  // Declared first: outlives the communicators whose waits check it.
  ASSIGN_OR_RETURN(std::unique_ptr<GroupHeartbeat> heartbeat, GroupHeartbeat::Start(MPI_COMM_WORLD, options.heartbeat));
  options.collectives.wait.liveness = heartbeat.get();
  options.control.wait.liveness = heartbeat.get();
  options.control.shared_memory_slot_bytes = 0;  // plans and flags only: no sums worth a segment
  ASSIGN_OR_RETURN(std::unique_ptr<MpiCommunicator> model_comm,
                   MpiCommunicator::Create(MPI_COMM_WORLD, options.collectives));
  ASSIGN_OR_RETURN(std::unique_ptr<MpiCommunicator> control, MpiCommunicator::Create(MPI_COMM_WORLD, options.control));
  const int rank = control->rank();

  StatusOr<LoadedShard> local = make_executor(model_comm.get());
  // Agree before serving: a rank that failed to load would leave the others waiting in their
  // first collective until the deadline. Also agree on the KV capacity (the minimum).
  int64_t agreed[2] = {local.ok() ? -1 : rank, local.ok() ? -local->num_kv_blocks : 0};
  RETURN_IF_ERROR(control->AllReduceMaxInt64(agreed, 2));
  if (!local.ok()) return local.status();
  if (agreed[0] >= 0) {
    return FailedPrecondition("rank " + std::to_string(agreed[0]) + " failed to load its shard");
  }
  CHECK(local->executor != nullptr);
  GroupInfo info;
  info.tp_size = control->size();
  info.num_kv_blocks = -agreed[1];

  GroupChannel channel(control.get());
  if (rank != 0) {
    GroupFollower follower(&channel, local->executor.get());
    Status served = follower.Serve();
    LOG(DEBUG) << "rank " << rank << ": served " << follower.num_steps() << " steps: " << served.ToString();
    return served;
  }
  GroupLeader leader(&channel, local->executor.get());
  RETURN_IF_ERROR(lead(leader, info));
  return leader.Shutdown();
}

}  // namespace tpserve
