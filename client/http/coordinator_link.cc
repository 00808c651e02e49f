#include "client/http/coordinator_link.h"

#include "comm/client_socket.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <boost/asio/post.hpp>
#include <zmq.hpp>

#include "comm/zmq_transport.h"
#include "common/logging.h"

namespace tpserve::http {
namespace {

constexpr std::chrono::milliseconds kSendTimeout{1000};

}  // namespace

StatusOr<std::unique_ptr<CoordinatorLink>> CoordinatorLink::Start(const CoordinatorLinkOptions& options) {
  auto context = std::make_unique<zmq::context_t>(1);
  ClientSocketOptions socket_options;
  socket_options.endpoint = options.endpoint;
  socket_options.keys_dir = options.keys_dir;
  socket_options.key_name = options.key_name;
  // The coordinator drops a client whose receive queue is full (it never blocks on one peer), and
  // with it every request of this gateway: the link thread only decodes and posts, and the queue
  // is deep enough for thousands of streams' bursts.
  socket_options.send_hwm = 100000;
  socket_options.recv_hwm = 1000000;
  ASSIGN_OR_RETURN(std::unique_ptr<ZmqSocket> socket, ConnectClientSocket(*context, socket_options));
  const int wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_fd < 0) return Internal("eventfd failed");
  std::unique_ptr<CoordinatorLink> link(new CoordinatorLink(options, std::move(context), std::move(socket), wake_fd));
  link->thread_ = std::thread([l = link.get()] { l->Run(); });
  return link;
}

CoordinatorLink::CoordinatorLink(const CoordinatorLinkOptions& options, std::unique_ptr<zmq::context_t> context,
                                 std::unique_ptr<ZmqSocket> socket, int wake_fd)
    : options_(options), context_(std::move(context)), socket_(std::move(socket)), wake_fd_(wake_fd) {}

CoordinatorLink::~CoordinatorLink() {
  stop_.store(true);
  const uint64_t one = 1;
  (void)!write(wake_fd_, &one, sizeof(one));
  if (thread_.joinable()) thread_.join();
  socket_.reset();  // before the context
  context_.reset();
  close(wake_fd_);
}

uint64_t CoordinatorLink::Send(proto::ClientMessage message, boost::asio::any_io_executor executor, Handler handler) {
  message.request_id = next_request_id_.fetch_add(1);
  {
    std::lock_guard<std::mutex> lock(mu_);
    routes_[message.request_id] = Route{std::move(executor), std::move(handler)};
  }
  const uint64_t id = message.request_id;
  Enqueue(std::move(message));
  return id;
}

void CoordinatorLink::Forget(uint64_t request_id) {
  std::lock_guard<std::mutex> lock(mu_);
  routes_.erase(request_id);
}

void CoordinatorLink::Cancel(uint64_t request_id) {
  Forget(request_id);
  proto::ClientMessage cancel;
  cancel.request_id = request_id;
  cancel.kind = proto::ClientMessageKind::kCancel;
  Enqueue(std::move(cancel));
}

std::optional<proto::HealthReply> CoordinatorLink::last_health() const {
  std::lock_guard<std::mutex> lock(mu_);
  return last_health_;
}

size_t CoordinatorLink::num_routes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return routes_.size();
}

void CoordinatorLink::Enqueue(proto::ClientMessage message) {
  message.api_key = options_.api_key;
  std::string bytes = proto::EncodeClientMessage(message);
  {
    std::lock_guard<std::mutex> lock(mu_);
    outbox_.push_back(std::move(bytes));
  }
  const uint64_t one = 1;
  (void)!write(wake_fd_, &one, sizeof(one));  // EAGAIN only when the counter is saturated: already awake
}

void CoordinatorLink::Dispatch(const std::string& frame) {
  StatusOr<proto::ServerMessage> message = proto::DecodeServerMessage(frame.data(), frame.size());
  if (!message.ok()) {
    LOG(WARN) << "tpserve-http: dropped an undecodable coordinator message: " << message.status().ToString();
    return;
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (message->request_id == kProbeRequestId) {
    if (message->kind == proto::ServerMessageKind::kHealth) last_health_ = message->health;
    return;
  }
  auto it = routes_.find(message->request_id);
  if (it == routes_.end()) return;  // forgotten: the HTTP side is gone or finished
  boost::asio::post(it->second.executor,
                    [handler = it->second.handler, m = std::move(*message)] { handler(m); });
}

void CoordinatorLink::FailAllRoutes(const std::string& why) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [id, route] : routes_) {
    boost::asio::post(route.executor, [handler = std::move(route.handler), id = id, why] {
      handler(proto::MakeErrorMessage(id, proto::ErrorKind::kUnavailable, why));
    });
  }
  routes_.clear();
  last_health_.reset();
}

void CoordinatorLink::Run() {
  auto last_probe = std::chrono::steady_clock::now() - options_.probe_interval;  // probe at once
  auto last_heard = std::chrono::steady_clock::now();
  while (!stop_.load()) {
    const auto now = std::chrono::steady_clock::now();
    if (now - last_heard > options_.silence_timeout) {
      FailAllRoutes("the coordinator at " + options_.endpoint + " has not answered for " +
                    std::to_string(options_.silence_timeout.count() / 1000) + " s");
      last_heard = now;
    }
    if (now - last_probe >= options_.probe_interval) {
      proto::ClientMessage probe;
      probe.request_id = kProbeRequestId;
      probe.kind = proto::ClientMessageKind::kHealth;
      Enqueue(std::move(probe));
      last_probe = now;
    }
    std::deque<std::string> outbox;
    {
      std::lock_guard<std::mutex> lock(mu_);
      outbox.swap(outbox_);
    }
    for (const std::string& bytes : outbox) {
      if (Status sent = socket_->Send({bytes}, kSendTimeout); !sent.ok()) {
        LOG(WARN) << "tpserve-http: could not send to the coordinator: " << sent.ToString();
      }
    }
    zmq_pollitem_t items[2] = {{socket_->socket().handle(), 0, ZMQ_POLLIN, 0}, {nullptr, wake_fd_, ZMQ_POLLIN, 0}};
    const auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(
        last_probe + options_.probe_interval - std::chrono::steady_clock::now());
    if (zmq_poll(items, 2, std::max<long>(0, wait.count())) < 0) continue;  // EINTR
    if (items[1].revents & ZMQ_POLLIN) {
      uint64_t count = 0;
      (void)!read(wake_fd_, &count, sizeof(count));
    }
    // Drain everything readable now (the DEALER's poll is level-triggered).
    while (true) {
      StatusOr<Frames> frames = socket_->Receive(std::chrono::milliseconds(0));
      if (!frames.ok()) break;
      last_heard = std::chrono::steady_clock::now();
      if (frames->size() == 1) Dispatch((*frames)[0]);
    }
  }
}

}  // namespace tpserve::http
