#include "worker/group_session_beat.h"

#include <pthread.h>

#include <algorithm>

#include "comm/worker_message.h"

namespace tpserve {
namespace {

constexpr std::chrono::milliseconds kMaxPollWait{50};  // how soon the thread sees a stop request

int64_t UnixMicros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

StatusOr<std::unique_ptr<SessionBeat>> SessionBeat::Start(zmq::context_t& context, const std::string& endpoint,
                                                          SocketOptions options, uint32_t group_id,
                                                          std::chrono::milliseconds interval) {
  options.routing_id += "/beat";
  options.send_hwm = 4;  // beats queued while the link is down are stale: keep few
  ASSIGN_OR_RETURN(std::unique_ptr<ZmqSocket> socket,
                   ZmqSocket::Connect(context, zmq::socket_type::dealer, endpoint, options));
  return std::unique_ptr<SessionBeat>(new SessionBeat(std::move(socket), group_id, interval));
}

SessionBeat::SessionBeat(std::unique_ptr<ZmqSocket> socket, uint32_t group_id, std::chrono::milliseconds interval)
    : socket_(std::move(socket)), group_id_(group_id), interval_(interval) {
  thread_ = std::thread([this] { Run(); });
}

SessionBeat::~SessionBeat() {
  stop_.store(true);
  thread_.join();
}

void SessionBeat::Run() {
  pthread_setname_np(pthread_self(), "tp-leader-beat");  // top -H, and bench/fault_cost.py's accounting
  using Clock = std::chrono::steady_clock;
  uint64_t sequence = 0;
  Clock::time_point next = Clock::now();
  while (!stop_.load()) {
    const Clock::time_point now = Clock::now();
    if (now >= next) {
      HeartbeatMessage beat{++sequence, UnixMicros(), false, group_id_};
      (void)socket_->Send({EncodeWorkerMessage(beat)}, std::chrono::milliseconds(0));  // full: the link is down
      next = now + interval_;
    }
    // The coordinator echoes each beat; read the echoes so they do not pile up.
    auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(next - now);
    (void)socket_->Receive(std::clamp(wait, std::chrono::milliseconds(1), kMaxPollWait));
  }
}

}  // namespace tpserve
