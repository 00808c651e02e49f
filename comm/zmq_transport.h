// ZeroMQ transport shared by the coordinator, the worker-group leader and the clients: thin RAII
// wrappers over cppzmq ROUTER/DEALER sockets that always set explicit limits, and multipart
// send/receive with a timeout. A peer that is slow, gone or sends too much becomes a Status,
// never a hang or an abort.
//
// Frames are byte strings. A ROUTER socket sees (and must send) the peer's routing id as the
// first frame; a DEALER sends and receives only its own frames.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <zmq.hpp>

#include "common/status.h"

namespace tpserve {

// ZMQ_CHECK(call): for a raw libzmq C call that returns -1 on error. On error, returns from the
// enclosing function (which must return Status or StatusOr) with UNAVAILABLE naming the call,
// file:line and zmq_strerror.
#define ZMQ_CHECK(call)                                                                   \
  do {                                                                                    \
    if ((call) == -1) {                                                                   \
      return ::tpserve::ZmqError(#call, zmq_errno(), __FILE__, __LINE__);                 \
    }                                                                                     \
  } while (0)

// The Status for a failed zmq call: DEADLINE_EXCEEDED for EAGAIN, UNAVAILABLE otherwise (ETERM,
// EHOSTUNREACH for an unknown ROUTER peer, ...), INVALID_ARGUMENT for EINVAL (a bad endpoint).
Status ZmqError(const char* what, int err, const char* file, int line);

using Frames = std::vector<std::string>;

struct SocketOptions {
  int64_t max_message_bytes = int64_t{256} << 20;  // ZMQ_MAXMSGSIZE: larger inbound messages drop the peer
  int send_hwm = 1000;                             // ZMQ_SNDHWM (messages)
  int recv_hwm = 1000;                             // ZMQ_RCVHWM (messages)
  int linger_ms = 0;                               // ZMQ_LINGER: close never waits for unsent data
  std::string routing_id;                          // ZMQ_ROUTING_ID of a DEALER ("": zmq picks one)
  bool router_mandatory = true;                    // ROUTER: sending to an unknown peer is an error
  // ROUTER: a peer connecting with a routing id already in use takes it over (ZMQ_ROUTER_HANDOVER)
  // instead of being ignored: a worker group reconnecting before its old connection is reaped.
  bool router_handover = false;
  int heartbeat_ivl_ms = 0;                        // ZMQ_HEARTBEAT_IVL (0: off); TCP-level liveness
  int heartbeat_timeout_ms = 0;                    // ZMQ_HEARTBEAT_TIMEOUT
  // CurveZMQ (comm/curve_keys.h), Z85 keys. A server socket sets curve_secret_key and a ZAP domain
  // (the ZapAuthenticator of its context admits the domain's listed keys); a client socket sets
  // curve_server_key plus its own public and secret keys. All empty: plain TCP.
  bool curve_server = false;
  std::string curve_public_key;
  std::string curve_secret_key;
  std::string curve_server_key;  // client only: the server's public key
  std::string zap_domain;        // server only: "clients" or "workers"
};

// One ZeroMQ socket. The context must outlive it. Not thread-safe (ZeroMQ sockets never are):
// one thread owns a socket.
class ZmqSocket {
 public:
  // A ROUTER or DEALER (or any type) bound to `endpoint`, e.g. "tcp://*:5555", "tcp://127.0.0.1:*"
  // (an ephemeral port; see endpoint()), "ipc:///tmp/x", "inproc://x".
  static StatusOr<std::unique_ptr<ZmqSocket>> Bind(zmq::context_t& context, zmq::socket_type type,
                                                   const std::string& endpoint,
                                                   const SocketOptions& options = {});
  // Connects asynchronously: success means the endpoint parsed, not that a peer is there.
  static StatusOr<std::unique_ptr<ZmqSocket>> Connect(zmq::context_t& context, zmq::socket_type type,
                                                      const std::string& endpoint,
                                                      const SocketOptions& options = {});

  // Sends all frames as one multipart message. Waits up to `timeout` for room (high-water mark);
  // DEADLINE_EXCEEDED if there is none, UNAVAILABLE if the peer is unknown/gone (ROUTER).
  // REQUIRES: !frames.empty()
  Status Send(const Frames& frames, std::chrono::milliseconds timeout);
  // Receives one multipart message, waiting up to `timeout` (0: only what is already there);
  // DEADLINE_EXCEEDED if none arrived in time.
  StatusOr<Frames> Receive(std::chrono::milliseconds timeout);
  // Whether a message can be received within `timeout`, without receiving it.
  StatusOr<bool> WaitReadable(std::chrono::milliseconds timeout);

  // The endpoint actually bound or connected (ZMQ_LAST_ENDPOINT): resolves "*" ports.
  const std::string& endpoint() const { return endpoint_; }
  zmq::socket_t& socket() { return socket_; }

 private:
  explicit ZmqSocket(zmq::socket_t socket) : socket_(std::move(socket)) {}
  static StatusOr<std::unique_ptr<ZmqSocket>> Open(zmq::context_t& context, zmq::socket_type type,
                                                   const std::string& endpoint,
                                                   const SocketOptions& options, bool bind);

  zmq::socket_t socket_;
  std::string endpoint_;
};

// Waits until at least one of `sockets` has a message (or `timeout`). Returns, per socket,
// whether it is readable; all false on timeout (not an error).
StatusOr<std::vector<bool>> PollReadable(const std::vector<ZmqSocket*>& sockets,
                                         std::chrono::milliseconds timeout);

}  // namespace tpserve
