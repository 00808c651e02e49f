#include "worker/group_session.h"

#include "comm/curve_keys.h"

#include <unistd.h>

#include <variant>

#include "comm/zmq_transport.h"
#include "common/logging.h"
#include "worker/group_follower.h"
#include "worker/group_session_beat.h"

namespace tpserve {
namespace {

using Clock = std::chrono::steady_clock;

class Session {
 public:
  Session(ZmqSocket* socket, StepExecutor* group, const GroupSessionOptions& options)
      : socket_(socket), group_(group), options_(options) {}

  Status Send(const WorkerMessage& message) {
    return socket_->Send({EncodeWorkerMessage(message)}, options_.send_timeout);
  }

  // The next decodable message, or DEADLINE_EXCEEDED after `timeout`. Undecodable frames are
  // logged and skipped (a peer's bug must not end the group).
  StatusOr<WorkerMessage> Receive(std::chrono::milliseconds timeout) {
    const Clock::time_point deadline = Clock::now() + timeout;
    for (;;) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      ASSIGN_OR_RETURN(Frames frames, socket_->Receive(std::max(left, std::chrono::milliseconds(0))));
      last_heard_ = Clock::now();
      StatusOr<WorkerMessage> message = DecodeWorkerMessage(frames.back());
      if (message.ok()) return message;
      LOG(WARN) << "worker: dropped a coordinator message: " << message.status().ToString();
    }
  }

  Status Handshake() {
    // A DEALER holds the Hello until the connection is up: allow the whole connect timeout.
    Status sent = socket_->Send({EncodeWorkerMessage(options_.hello)}, options_.connect_timeout);
    if (!sent.ok()) {
      return Unavailable("could not reach the coordinator at " + options_.coordinator_endpoint + ": " +
                         sent.ToString());
    }
    const Clock::time_point deadline = Clock::now() + options_.connect_timeout;
    for (;;) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      StatusOr<WorkerMessage> message = Receive(std::max(left, std::chrono::milliseconds(0)));
      if (!message.ok()) {
        return Unavailable("no Welcome from the coordinator at " + options_.coordinator_endpoint + ": " +
                           message.status().ToString());
      }
      if (auto* welcome = std::get_if<WelcomeMessage>(&*message)) {
        heartbeat_interval_ = std::chrono::milliseconds(welcome->heartbeat_interval_ms);
        group_id_ = welcome->group_id;
        LOG(INFO) << "worker: registered with the coordinator as group " << welcome->group_id;
        return OkStatus();
      }
      if (auto* error = std::get_if<ErrorMessage>(&*message)) {
        return Unavailable("the coordinator refused this group: " + error->ToStatus().ToString());
      }
      if (std::holds_alternative<ShutdownMessage>(*message)) {
        return Unavailable("the coordinator shut this group down before welcoming it: " +
                           std::get<ShutdownMessage>(*message).reason);
      }
      // Anything else before Welcome is out of order; ignore it.
    }
  }

  // Serves until Shutdown (OK) or a fatal error.
  Status Loop() {
    for (;;) {
      StatusOr<WorkerMessage> message = Receive(options_.poll_interval);
      if (!message.ok()) {
        if (message.status().code() != StatusCode::kDeadlineExceeded) return message.status();
        RETURN_IF_ERROR(CheckCoordinatorAlive());
        RETURN_IF_ERROR(CheckRanks());
        continue;
      }
      if (auto* plan = std::get_if<StepPlan>(&*message)) {
        RETURN_IF_ERROR(RunStep(*plan));
      } else if (auto* heartbeat = std::get_if<HeartbeatMessage>(&*message)) {
        if (!heartbeat->is_echo) {
          HeartbeatMessage echo = *heartbeat;
          echo.is_echo = true;
          RETURN_IF_ERROR(Send(echo));
        }
      } else if (auto* shutdown = std::get_if<ShutdownMessage>(&*message)) {
        LOG(INFO) << "worker: coordinator shut the group down: " << shutdown->reason;
        return OkStatus();
      } else if (auto* error = std::get_if<ErrorMessage>(&*message)) {
        LOG(WARN) << "worker: coordinator reports " << error->ToStatus().ToString();
        if (error->is_fatal) return Unavailable("coordinator: " + error->message);
      } else {
        LOG(WARN) << "worker: ignored an unexpected " << WorkerMessageName(*message) << " message";
      }
    }
  }

  uint32_t group_id() const { return group_id_; }
  // Loop ended because the coordinator went silent (not by its word, nor by the group's error).
  bool is_coordinator_lost() const { return is_coordinator_lost_; }
  std::chrono::milliseconds heartbeat_interval() const { return heartbeat_interval_; }

 private:
  Status RunStep(const StepPlan& plan) {
    StatusOr<StepResult> result = group_->Execute(plan);
    if (result.ok()) return Send(*result);
    const bool is_fatal = !IsPlanError(result.status());
    ErrorMessage error{result.status().code(), result.status().message(), plan.step_id, is_fatal};
    Status sent = Send(error);
    if (is_fatal) return result.status();
    return sent;
  }

  Status CheckRanks() {
    if (!options_.check_ranks) return OkStatus();
    Status ranks = options_.check_ranks();
    if (!ranks.ok()) (void)Send(ErrorMessage{ranks.code(), ranks.message(), 0, true});
    return ranks;
  }

  Status CheckCoordinatorAlive() {
    if (heartbeat_interval_.count() == 0) return OkStatus();
    const auto silence = std::max(options_.min_silence, heartbeat_interval_ * options_.lost_after_intervals);
    if (Clock::now() - last_heard_ > silence) {
      is_coordinator_lost_ = true;
      return Unavailable("the coordinator has been silent for more than " + std::to_string(silence.count()) +
                         " ms");
    }
    return OkStatus();
  }

  ZmqSocket* socket_;
  StepExecutor* group_;
  const GroupSessionOptions& options_;
  std::chrono::milliseconds heartbeat_interval_{0};
  uint32_t group_id_ = 0;
  bool is_coordinator_lost_ = false;
  Clock::time_point last_heard_ = Clock::now();
};

}  // namespace

Status ServeCoordinator(zmq::context_t& context, StepExecutor& group, const GroupSessionOptions& options) {
  SocketOptions socket_options;
  socket_options.routing_id = options.routing_id;
  if (socket_options.routing_id.empty()) {
    char host[256] = {};
    gethostname(host, sizeof(host) - 1);
    socket_options.routing_id = std::string(host) + ":" + std::to_string(getpid());
  }
  RETURN_IF_ERROR(UseCurveClientKeys(options.keys_dir, "workers", options.key_name, &socket_options));
  for (;;) {  // one registration per coordinator (a restarted one, or the same after a cut)
    ASSIGN_OR_RETURN(std::unique_ptr<ZmqSocket> socket, ZmqSocket::Connect(context, zmq::socket_type::dealer,
                                                                           options.coordinator_endpoint, socket_options));
    Session session(socket.get(), &group, options);
    RETURN_IF_ERROR(session.Handshake());
    std::unique_ptr<SessionBeat> beat;
    if (session.heartbeat_interval().count() > 0) {
      ASSIGN_OR_RETURN(beat, SessionBeat::Start(context, options.coordinator_endpoint, socket_options,
                                                session.group_id(), session.heartbeat_interval()));
    }
    Status served = session.Loop();
    if (!session.is_coordinator_lost()) return served;
    LOG(WARN) << "worker: " << served.message() << "; keeping the weights loaded and registering again";
  }
}

}  // namespace tpserve
