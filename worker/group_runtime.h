// RunGroup: turns the ranks of an MPI job into one tensor-parallel group. Every rank builds its
// executor over a communicator of its own for the model's collectives; the ranks agree that all
// of them loaded; then rank 0 runs `lead` with a GroupLeader (a StepExecutor for the whole group)
// while the other ranks serve its plans until it returns.
//
//   RunGroup([&](Communicator* comm) { return LoadMyShard(comm); },
//            [&](GroupLeader& group, const GroupInfo& info) { return Drive(group, info); });
#pragma once

#include <functional>
#include <memory>

#include "comm/mpi_communicator.h"
#include "common/status.h"
#include "worker/group_heartbeat.h"
#include "worker/group_leader.h"
#include "worker/step_executor.h"

namespace tpserve {

struct GroupRuntimeOptions {
  MpiCommunicatorOptions collectives;  // the model's all-reduces (per-collective deadline)
  MpiCommunicatorOptions control;      // plan broadcasts (deadline after a command header)
  // The ranks' liveness (worker/group_heartbeat.h): both communicators' waits give up as soon as
  // a peer is lost, whatever their deadline.
  GroupHeartbeatOptions heartbeat;
};

// One rank's loaded shard: its executor and the KV blocks it allocated (ranks with more KV heads
// fit fewer blocks in the same memory; the group offers the smallest count).
struct LoadedShard {
  std::unique_ptr<StepExecutor> executor;
  int64_t num_kv_blocks = 0;
};

// What the leader learns when the group is up.
struct GroupInfo {
  int tp_size = 1;
  int64_t num_kv_blocks = 0;  // the minimum over ranks: plans may use blocks [0, num_kv_blocks)
};

// Builds this rank's executor; `comm` (rank() = TP rank, size() = TP size) outlives the executor.
using MakeExecutorFunction = std::function<StatusOr<LoadedShard>(Communicator* comm)>;
// Runs on rank 0 only, with the group; when it returns OK the followers are shut down.
using LeadFunction = std::function<Status(GroupLeader& group, const GroupInfo& info)>;

// REQUIRES: MPI is initialised (see RunMpiProcess in worker/group_process.h).
// OK on every rank after a clean shutdown. On rank 0: lead's error, or a failure to load on any rank
// (FAILED_PRECONDITION "rank r failed to load" on ranks whose own load worked). On a follower: the
// group's error (lost leader or peer — within options.heartbeat.lost_after —, deadline). After an error the group is unusable: exit
// (RunMpiProcess aborts the whole job).
Status RunGroup(const MakeExecutorFunction& make_executor, const LeadFunction& lead,
                GroupRuntimeOptions options = {});

}  // namespace tpserve
