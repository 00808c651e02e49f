// PeerLiveness: whether every peer of a group is alive, as something outside MPI knows it (a
// heartbeat thread, worker/group_heartbeat.h). MPI cannot tell a slow peer from a stopped one, and
// a collective waiting on a stopped peer would wait for its deadline: waits that are given a
// PeerLiveness (WaitPolicy::liveness) give up as soon as it reports a peer gone.
#pragma once

#include "common/status.h"

namespace tpserve {

class PeerLiveness {
 public:
  virtual ~PeerLiveness() = default;
  // OK while every peer is alive; UNAVAILABLE naming the lost peer once one is gone (for good).
  // Thread-safe and cheap (an atomic load while healthy): waits call it on every poll.
  virtual Status Check() const = 0;
};

}  // namespace tpserve
