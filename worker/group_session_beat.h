// SessionBeat: the group leader's "still alive" to the coordinator, from a thread and a DEALER
// connection of its own (routing id: the session's + "/beat"), every Welcome interval. The
// session's own connection is quiet while a step runs (one thread executes the step), so without
// this the coordinator could not tell a long prefill from a stopped or hung leader; with it, a
// leader that stops beating for the coordinator's heartbeat timeout is lost, step or no step.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include <zmq.hpp>

#include "comm/zmq_transport.h"
#include "common/status.h"

namespace tpserve {

class SessionBeat {
 public:
  // Connects (asynchronously) with `options` (CURVE keys as the session's) and starts beating for
  // `group_id`. The context must outlive the beat.
  static StatusOr<std::unique_ptr<SessionBeat>> Start(zmq::context_t& context, const std::string& endpoint,
                                                      SocketOptions options, uint32_t group_id,
                                                      std::chrono::milliseconds interval);
  ~SessionBeat();  // stops the thread, closes the connection

 private:
  SessionBeat(std::unique_ptr<ZmqSocket> socket, uint32_t group_id, std::chrono::milliseconds interval);
  void Run();

  std::unique_ptr<ZmqSocket> socket_;  // owned by the thread once started
  uint32_t group_id_;
  std::chrono::milliseconds interval_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace tpserve
