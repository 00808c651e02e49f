// GroupHeartbeat: the ranks of a worker group tell each other they are alive, outside MPI, so that
// a rank that died or stopped (SIGSTOP, a hung host) is known gone within `lost_after` instead of
// at a collective's deadline (MPI cannot tell slow from stopped). A star: rank 0 binds a ROUTER,
// each other rank connects a DEALER; every `interval` each side sends a ping from a thread of its
// own (so a long step does not delay it). The leader watches every follower, each follower its
// leader; a follower that loses another follower learns it when the leader's group goes.
//
// Once a peer is silent for `lost_after`, Check() (PeerLiveness) reports it for good: the MPI
// waits given this object abandon their collective and the rank exits (RunMpiProcess aborts the
// job). As a backstop for a main thread that is not in such a wait (an NCCL collective, a kernel
// that never returns), the heartbeat thread ends the process itself `exit_grace` later.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include <mpi.h>

#include "comm/peer_liveness.h"
#include "common/status.h"

namespace tpserve {

struct GroupHeartbeatOptions {
  std::chrono::milliseconds interval{250};
  std::chrono::milliseconds lost_after{2000};
  std::chrono::milliseconds exit_grace{2000};
};

class GroupHeartbeat : public PeerLiveness {
 public:
  // Collective over `comm` (an MPI_Bcast of rank 0's endpoint): rank 0 binds on loopback when the
  // whole job is on this host, else on $TPSERVE_HEARTBEAT_HOST or this host's first non-loopback
  // IPv4 address; the others connect. Then starts the thread. Null (OK) for a group of one rank:
  // nobody to watch. REQUIRES: MPI is initialised.
  static StatusOr<std::unique_ptr<GroupHeartbeat>> Start(MPI_Comm comm, const GroupHeartbeatOptions& options = {});
  ~GroupHeartbeat() override;  // stops the thread

  Status Check() const override;

 private:
  struct State;
  explicit GroupHeartbeat(std::unique_ptr<State> state);

  std::unique_ptr<State> state_;
  std::thread thread_;
};

}  // namespace tpserve
