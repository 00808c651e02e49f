#include "worker/group_heartbeat.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <zmq.hpp>

#include "comm/zmq_transport.h"
#include "worker/group_launch.h"

namespace tpserve {
namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kEndpointBytes = 256;
constexpr std::chrono::milliseconds kMaxPollWait{50};  // how soon the thread sees a stop request

std::string RankIdentity(int rank) { return "rank" + std::to_string(rank); }

// Where rank 0 binds: loopback when every rank of the job runs on this host.
std::string BindHost(int size) {
  if (LocalRanksOnHost() == size) return "127.0.0.1";
  if (const char* host = std::getenv("TPSERVE_HEARTBEAT_HOST"); host != nullptr && *host) return host;
  std::string found = "127.0.0.1";
  ifaddrs* addresses = nullptr;
  if (getifaddrs(&addresses) != 0) return found;
  for (ifaddrs* a = addresses; a != nullptr; a = a->ifa_next) {
    if (a->ifa_addr == nullptr || a->ifa_addr->sa_family != AF_INET) continue;
    char text[INET_ADDRSTRLEN] = {};
    inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(a->ifa_addr)->sin_addr, text, sizeof(text));
    if (std::strncmp(text, "127.", 4) == 0) continue;
    found = text;
    break;
  }
  freeifaddrs(addresses);
  return found;
}

}  // namespace

struct GroupHeartbeat::State {
  GroupHeartbeatOptions options;
  int rank = 0;
  int size = 1;
  zmq::context_t context{1};
  std::unique_ptr<ZmqSocket> socket;
  std::atomic<bool> stop{false};
  std::atomic<bool> lost{false};
  mutable std::mutex mu;
  std::string lost_reason;  // GUARDED_BY(mu), set once with lost

  void Run();
  void Ping();
  void Declare(const std::string& reason);
};

void GroupHeartbeat::State::Ping() {
  // Timeout 0: a full queue (the peer is not reading) drops the ping, which is what silence means.
  if (rank != 0) {
    (void)socket->Send({"ping"}, std::chrono::milliseconds(0));
    return;
  }
  for (int r = 1; r < size; ++r) (void)socket->Send({RankIdentity(r), "ping"}, std::chrono::milliseconds(0));
}

void GroupHeartbeat::State::Declare(const std::string& reason) {
  {
    std::lock_guard<std::mutex> lock(mu);
    lost_reason = reason;
  }
  lost.store(true);
  std::fprintf(stderr, "worker group rank %d/%d: %s\n", rank, size, reason.c_str());
  std::fflush(stderr);
}

void GroupHeartbeat::State::Run() {
  pthread_setname_np(pthread_self(), "tp-heartbeat");  // top -H, and bench/fault_cost.py's accounting
  const Clock::time_point start = Clock::now();
  std::vector<Clock::time_point> last_heard(size, start);  // [size]; rank 0's own entry unused
  Clock::time_point next_ping = start;
  Clock::time_point lost_at;
  while (!stop.load()) {
    Clock::time_point now = Clock::now();
    if (now >= next_ping) {
      Ping();
      next_ping = now + options.interval;
    }
    auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(next_ping - now);
    StatusOr<Frames> frames = socket->Receive(std::clamp(wait, std::chrono::milliseconds(1), kMaxPollWait));
    now = Clock::now();
    if (frames.ok()) {
      if (rank != 0) {
        last_heard[0] = now;
      } else if (frames->size() == 2 && frames->front().rfind("rank", 0) == 0) {
        const int peer = std::atoi(frames->front().c_str() + 4);
        if (peer > 0 && peer < size) last_heard[peer] = now;
      }
    }
    if (lost.load()) {
      if (now - lost_at > options.exit_grace) {
        std::fprintf(stderr, "worker group rank %d/%d: still running %lld ms after a peer was lost; exiting\n", rank,
                     size, static_cast<long long>(options.exit_grace.count()));
        std::fflush(stderr);
        _exit(1);
      }
      continue;
    }
    for (int peer = rank == 0 ? 1 : 0; peer < (rank == 0 ? size : 1); ++peer) {
      const auto silent = std::chrono::duration_cast<std::chrono::milliseconds>(now - last_heard[peer]);
      if (silent > options.lost_after) {
        Declare("rank " + std::to_string(peer) + " silent for " + std::to_string(silent.count()) +
                " ms (dead, stopped or unreachable): the group is lost");
        lost_at = now;
        break;
      }
    }
  }
}

GroupHeartbeat::GroupHeartbeat(std::unique_ptr<State> state) : state_(std::move(state)) {
  thread_ = std::thread([s = state_.get()] { s->Run(); });
}

GroupHeartbeat::~GroupHeartbeat() {
  state_->stop.store(true);
  thread_.join();
}

Status GroupHeartbeat::Check() const {
  if (!state_->lost.load(std::memory_order_acquire)) return OkStatus();
  std::lock_guard<std::mutex> lock(state_->mu);
  return Unavailable(state_->lost_reason);
}

StatusOr<std::unique_ptr<GroupHeartbeat>> GroupHeartbeat::Start(MPI_Comm comm, const GroupHeartbeatOptions& options) {
  auto state = std::make_unique<State>();
  state->options = options;
  MPI_Comm_rank(comm, &state->rank);
  MPI_Comm_size(comm, &state->size);
  char endpoint[kEndpointBytes] = {};
  SocketOptions socket_options;
  socket_options.router_mandatory = false;  // pings to a follower not connected yet are dropped
  socket_options.max_message_bytes = 256;
  if (state->rank == 0 && state->size > 1) {
    ASSIGN_OR_RETURN(state->socket, ZmqSocket::Bind(state->context, zmq::socket_type::router,
                                                    "tcp://" + BindHost(state->size) + ":*", socket_options));
    std::snprintf(endpoint, sizeof(endpoint), "%s", state->socket->endpoint().c_str());
  }
  if (MPI_Bcast(endpoint, kEndpointBytes, MPI_CHAR, 0, comm) != MPI_SUCCESS) {
    return Unavailable("group heartbeat: could not share the leader's endpoint");
  }
  if (state->rank != 0) {
    socket_options.routing_id = RankIdentity(state->rank);
    ASSIGN_OR_RETURN(state->socket, ZmqSocket::Connect(state->context, zmq::socket_type::dealer,
                                                       std::string(endpoint), socket_options));
  }
  if (state->size == 1) return std::unique_ptr<GroupHeartbeat>();  // nobody to watch
  return std::unique_ptr<GroupHeartbeat>(new GroupHeartbeat(std::move(state)));
}

}  // namespace tpserve
