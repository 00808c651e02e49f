// ServeCoordinator: the group leader's conversation with the coordinator (comm/schema/worker.capnp).
// Connects a DEALER to the coordinator's worker endpoint, sends Hello, waits for Welcome, then
// executes each StepPlan on the group and answers with its StepResult, echoes heartbeats, and
// returns on Shutdown. Meanwhile a SessionBeat (worker/group_session_beat.h) tells the coordinator,
// from a thread of its own, that the leader is alive, also while a step runs.
#pragma once

#include <chrono>
#include <functional>
#include <string>

#include <zmq.hpp>

#include "comm/worker_message.h"
#include "common/status.h"
#include "worker/step_executor.h"

namespace tpserve {

struct GroupSessionOptions {
  std::string coordinator_endpoint;  // e.g. "tcp://10.0.0.1:5556"
  HelloMessage hello;                // what this group offers
  std::string routing_id;            // the DEALER's identity ("": hostname:pid)
  std::string keys_dir;              // CURVE key directory ("": plain TCP); uses DIR/workers/<key_name>.key
  std::string key_name;
  std::chrono::milliseconds connect_timeout{60000};  // until Hello is delivered and Welcome arrives
  std::chrono::milliseconds send_timeout{10000};
  // With heartbeats (Welcome.heartbeat_interval_ms > 0), the coordinator counts as lost after
  // this many intervals without any message from it (and at least min_silence): with the
  // coordinator's default 500 ms, 2.5 s.
  int lost_after_intervals = 5;
  std::chrono::milliseconds min_silence{2500};
  // How often the idle loop wakes up to check liveness.
  std::chrono::milliseconds poll_interval{200};
  // The group's own liveness (GroupLeader::CheckRanks), checked by the idle loop: a lost rank is
  // reported to the coordinator (fatal Error) and ends the session with its error. Null: none.
  std::function<Status()> check_ranks;
};

// A coordinator that goes silent (it died, or is restarting) is left behind: the group keeps its
// weights, connects again and sends Hello (to the restarted coordinator, which takes it in as a new
// group), and serves on.
//
// OK on the coordinator's Shutdown. UNAVAILABLE when no coordinator welcomes the group within
// connect_timeout (at start or after losing one), or it refuses the Hello (its Error message);
// check_ranks' error (reported first as a fatal Error); a step error that is not a plan error (reported to
// the coordinator first as a fatal Error). Plan errors are reported (non-fatal Error with the
// step id) and serving goes on.
Status ServeCoordinator(zmq::context_t& context, StepExecutor& group, const GroupSessionOptions& options);

}  // namespace tpserve
