// CoordinatorLink: the gateway's one connection to the coordinator — a ZeroMQ DEALER speaking
// comm/schema/client.capnp — bridged to Asio.
//
// ZeroMQ sockets are single-threaded, so one link thread owns the DEALER. HTTP sessions (any
// thread) hand it messages through a mutex-guarded queue and wake it through an eventfd that the
// thread polls beside the socket (zmq_poll takes plain fds); replies are routed by request id to
// the handler the session registered, posted onto the session's executor (its strand), so a
// handler never runs on the link thread. The thread also sends a `health` probe every
// `probe_interval`, which doubles as the heartbeat the coordinator expects from a live client and
// keeps the last health reply (model name, context length) at hand; a coordinator that stops
// answering altogether fails the pending requests (silence_timeout).
//
// Thread-safe: every public method may be called from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include <boost/asio/any_io_executor.hpp>

#include "comm/client_codec.h"
#include "common/status.h"

namespace zmq {
class context_t;
}

namespace tpserve {
class ZmqSocket;
}

namespace tpserve::http {

struct CoordinatorLinkOptions {
  std::string endpoint = "tcp://127.0.0.1:5555";
  std::string api_key;  // sent with every message (the coordinator's --api-key)
  std::string keys_dir;  // CURVE key directory ("": plain TCP), a client key pair like the CLI's
  std::string key_name;
  std::chrono::milliseconds probe_interval{1000};
  // A coordinator silent this long (no reply, not even to the probes) is taken for gone: every
  // routed request gets an `unavailable` error, so no HTTP client waits forever.
  std::chrono::milliseconds silence_timeout{30000};
};

class CoordinatorLink {
 public:
  using Handler = std::function<void(const proto::ServerMessage&)>;

  // Connects (asynchronously: a coordinator that is not there yet is reached when it comes up)
  // and starts the link thread.
  static StatusOr<std::unique_ptr<CoordinatorLink>> Start(const CoordinatorLinkOptions& options);
  ~CoordinatorLink();  // stops and joins the thread; pending handlers are dropped
  CoordinatorLink(const CoordinatorLink&) = delete;
  CoordinatorLink& operator=(const CoordinatorLink&) = delete;

  // Gives `message` a fresh request id, routes every reply carrying it to `handler` (posted on
  // `executor`) until Forget/Cancel, queues the message, and returns the id.
  uint64_t Send(proto::ClientMessage message, boost::asio::any_io_executor executor, Handler handler);
  // Drops the route of `request_id`: later replies are discarded.
  void Forget(uint64_t request_id);
  // Forget, then tell the coordinator to cancel the generate request (its KV blocks are freed by
  // the next step).
  void Cancel(uint64_t request_id);

  // The last health probe's reply (nullopt until the coordinator answered one).
  std::optional<proto::HealthReply> last_health() const;
  size_t num_routes() const;

 private:
  struct Route {
    boost::asio::any_io_executor executor;
    Handler handler;
  };

  CoordinatorLink(const CoordinatorLinkOptions& options, std::unique_ptr<zmq::context_t> context,
                  std::unique_ptr<ZmqSocket> socket, int wake_fd);
  void Enqueue(proto::ClientMessage message);
  void Run();                                  // the link thread
  void Dispatch(const std::string& frame);     // one received message → its route
  void FailAllRoutes(const std::string& why);  // the coordinator is gone

  const CoordinatorLinkOptions options_;
  std::unique_ptr<zmq::context_t> context_;
  std::unique_ptr<ZmqSocket> socket_;  // only the link thread touches it after Start
  const int wake_fd_;                  // eventfd: "the outbox has messages" / "stop"
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> next_request_id_{2};  // 1 is the health probe's
  static constexpr uint64_t kProbeRequestId = 1;

  mutable std::mutex mu_;
  std::deque<std::string> outbox_;                 // GUARDED_BY(mu_): encoded messages
  std::map<uint64_t, Route> routes_;               // GUARDED_BY(mu_)
  std::optional<proto::HealthReply> last_health_;  // GUARDED_BY(mu_)
};

}  // namespace tpserve::http
