#include "comm/zmq_transport.h"

#include <algorithm>
#include <cerrno>

namespace tpserve {
namespace {

using Clock = std::chrono::steady_clock;

Status FromError(const char* what, const zmq::error_t& e) {
  return ZmqError(what, e.num(), __FILE__, __LINE__);
}

std::chrono::milliseconds Remaining(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return std::max(left, std::chrono::milliseconds(0));
}

}  // namespace

Status ZmqError(const char* what, int err, const char* file, int line) {
  std::string message = std::string(what) + " failed at " + file + ":" + std::to_string(line) + ": " +
                        zmq_strerror(err);
  if (err == EAGAIN) return DeadlineExceeded(std::move(message));
  if (err == EINVAL || err == EPROTONOSUPPORT || err == ENOCOMPATPROTO) {
    return InvalidArgument(std::move(message));
  }
  return Unavailable(std::move(message));
}

StatusOr<std::unique_ptr<ZmqSocket>> ZmqSocket::Bind(zmq::context_t& context, zmq::socket_type type,
                                                     const std::string& endpoint,
                                                     const SocketOptions& options) {
  return Open(context, type, endpoint, options, /*bind=*/true);
}

StatusOr<std::unique_ptr<ZmqSocket>> ZmqSocket::Connect(zmq::context_t& context, zmq::socket_type type,
                                                        const std::string& endpoint,
                                                        const SocketOptions& options) {
  return Open(context, type, endpoint, options, /*bind=*/false);
}

StatusOr<std::unique_ptr<ZmqSocket>> ZmqSocket::Open(zmq::context_t& context, zmq::socket_type type,
                                                     const std::string& endpoint,
                                                     const SocketOptions& options, bool bind) {
  try {
    zmq::socket_t socket(context, type);
    socket.set(zmq::sockopt::linger, options.linger_ms);
    socket.set(zmq::sockopt::maxmsgsize, options.max_message_bytes);
    socket.set(zmq::sockopt::sndhwm, options.send_hwm);
    socket.set(zmq::sockopt::rcvhwm, options.recv_hwm);
    if (options.heartbeat_ivl_ms > 0) {
      socket.set(zmq::sockopt::heartbeat_ivl, options.heartbeat_ivl_ms);
      socket.set(zmq::sockopt::heartbeat_timeout, options.heartbeat_timeout_ms > 0
                                                      ? options.heartbeat_timeout_ms
                                                      : 3 * options.heartbeat_ivl_ms);
    }
    if (!options.routing_id.empty()) socket.set(zmq::sockopt::routing_id, options.routing_id);
    if (options.curve_server) {
      socket.set(zmq::sockopt::curve_server, 1);
      socket.set(zmq::sockopt::curve_secretkey, options.curve_secret_key);
      socket.set(zmq::sockopt::zap_domain, options.zap_domain);
    } else if (!options.curve_server_key.empty()) {
      socket.set(zmq::sockopt::curve_serverkey, options.curve_server_key);
      socket.set(zmq::sockopt::curve_publickey, options.curve_public_key);
      socket.set(zmq::sockopt::curve_secretkey, options.curve_secret_key);
    }
    if (type == zmq::socket_type::router && options.router_mandatory) {
      socket.set(zmq::sockopt::router_mandatory, 1);
    }
    if (type == zmq::socket_type::router && options.router_handover) {
      socket.set(zmq::sockopt::router_handover, 1);
    }
    if (bind) {
      socket.bind(endpoint);
    } else {
      socket.connect(endpoint);
    }
    std::unique_ptr<ZmqSocket> result(new ZmqSocket(std::move(socket)));
    result->endpoint_ = result->socket_.get(zmq::sockopt::last_endpoint);
    return result;
  } catch (const zmq::error_t& e) {
    Status status = FromError(bind ? "bind" : "connect", e);
    return Status(status.code(), status.message() + " (endpoint " + endpoint + ")");
  }
}

Status ZmqSocket::Send(const Frames& frames, std::chrono::milliseconds timeout) {
  CHECK(!frames.empty());
  const Clock::time_point deadline = Clock::now() + timeout;
  try {
    // The first frame decides: once it is queued, ZeroMQ accepts the rest of the multipart
    // message atomically.
    for (;;) {
      auto flags = zmq::send_flags::dontwait;
      if (frames.size() > 1) flags = flags | zmq::send_flags::sndmore;
      if (socket_.send(zmq::buffer(frames[0]), flags)) break;
      std::chrono::milliseconds left = Remaining(deadline);
      if (left.count() == 0) {
        return DeadlineExceeded("zmq send: no room within " + std::to_string(timeout.count()) + " ms");
      }
      // A ROUTER reports POLLOUT even when one peer's pipe is full, so cap each wait and retry.
      zmq::pollitem_t item{socket_.handle(), 0, ZMQ_POLLOUT, 0};
      zmq::poll(&item, 1, std::min(left, std::chrono::milliseconds(5)));
    }
    for (size_t i = 1; i < frames.size(); ++i) {
      auto flags = zmq::send_flags::dontwait;
      if (i + 1 < frames.size()) flags = flags | zmq::send_flags::sndmore;
      if (!socket_.send(zmq::buffer(frames[i]), flags)) {
        return Internal("zmq send: a later frame of a multipart message was refused");
      }
    }
    return OkStatus();
  } catch (const zmq::error_t& e) {
    return FromError("zmq send", e);
  }
}

StatusOr<bool> ZmqSocket::WaitReadable(std::chrono::milliseconds timeout) {
  try {
    zmq::pollitem_t item{socket_.handle(), 0, ZMQ_POLLIN, 0};
    zmq::poll(&item, 1, timeout);
    return (item.revents & ZMQ_POLLIN) != 0;
  } catch (const zmq::error_t& e) {
    return FromError("zmq poll", e);
  }
}

StatusOr<Frames> ZmqSocket::Receive(std::chrono::milliseconds timeout) {
  const Clock::time_point deadline = Clock::now() + timeout;
  try {
    Frames frames;
    zmq::message_t message;
    for (;;) {
      if (socket_.recv(message, zmq::recv_flags::dontwait)) break;
      std::chrono::milliseconds left = Remaining(deadline);
      if (left.count() == 0) {
        return DeadlineExceeded("zmq receive: nothing within " + std::to_string(timeout.count()) + " ms");
      }
      zmq::pollitem_t item{socket_.handle(), 0, ZMQ_POLLIN, 0};
      zmq::poll(&item, 1, left);
    }
    frames.emplace_back(message.data<char>(), message.size());
    // The remaining frames of a multipart message are already here (delivery is atomic).
    while (message.more()) {
      if (!socket_.recv(message, zmq::recv_flags::dontwait)) {
        return Internal("zmq receive: multipart message arrived incomplete");
      }
      frames.emplace_back(message.data<char>(), message.size());
    }
    return frames;
  } catch (const zmq::error_t& e) {
    return FromError("zmq receive", e);
  }
}

StatusOr<std::vector<bool>> PollReadable(const std::vector<ZmqSocket*>& sockets,
                                         std::chrono::milliseconds timeout) {
  std::vector<zmq::pollitem_t> items;
  items.reserve(sockets.size());
  for (ZmqSocket* socket : sockets) items.push_back({socket->socket().handle(), 0, ZMQ_POLLIN, 0});
  try {
    zmq::poll(items.data(), items.size(), timeout);
  } catch (const zmq::error_t& e) {
    return FromError("zmq poll", e);
  }
  std::vector<bool> readable(sockets.size());
  for (size_t i = 0; i < items.size(); ++i) readable[i] = (items[i].revents & ZMQ_POLLIN) != 0;
  return readable;
}

}  // namespace tpserve
