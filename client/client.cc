#include "client/client.h"

#include "comm/client_socket.h"

#include <cstring>

#include <zmq.hpp>

#include "comm/zmq_transport.h"

namespace tpserve {

using proto::ClientMessage;
using proto::ClientMessageKind;
using proto::ServerMessage;
using proto::ServerMessageKind;

Status StatusFromError(const proto::ErrorReply& error) {
  StatusCode code = StatusCode::kInternal;
  switch (error.kind) {
    case proto::ErrorKind::kInvalidRequest: code = StatusCode::kInvalidArgument; break;
    case proto::ErrorKind::kPromptTooLong: code = StatusCode::kOutOfRange; break;
    case proto::ErrorKind::kOverloaded: code = StatusCode::kResourceExhausted; break;
    case proto::ErrorKind::kCancelled: code = StatusCode::kCancelled; break;
    case proto::ErrorKind::kWorkerLost: code = StatusCode::kUnavailable; break;
    case proto::ErrorKind::kUnauthenticated: code = StatusCode::kUnauthenticated; break;
    case proto::ErrorKind::kUnavailable: code = StatusCode::kUnavailable; break;
    case proto::ErrorKind::kInternal: code = StatusCode::kInternal; break;
  }
  return Status(code, std::string(proto::ErrorKindName(error.kind)) + ": " + error.message);
}

StatusOr<std::unique_ptr<Client>> Client::Connect(const ClientOptions& options) {
  auto context = std::make_unique<zmq::context_t>(1);
  ClientSocketOptions socket_options;
  socket_options.endpoint = options.server;
  socket_options.keys_dir = options.keys_dir;
  socket_options.key_name = options.key_name;
  ASSIGN_OR_RETURN(std::unique_ptr<ZmqSocket> socket, ConnectClientSocket(*context, socket_options));
  constexpr const char* kMonitorEndpoint = "inproc://client-monitor";  // the context is this client's
  ZMQ_CHECK(zmq_socket_monitor(socket->socket().handle(), kMonitorEndpoint,
                               ZMQ_EVENT_HANDSHAKE_SUCCEEDED | ZMQ_EVENT_DISCONNECTED));
  ASSIGN_OR_RETURN(std::unique_ptr<ZmqSocket> monitor,
                   ZmqSocket::Connect(*context, zmq::socket_type::pair, kMonitorEndpoint));
  return std::unique_ptr<Client>(new Client(options, std::move(context), std::move(socket), std::move(monitor)));
}

Client::Client(const ClientOptions& options, std::unique_ptr<zmq::context_t> context,
               std::unique_ptr<ZmqSocket> socket, std::unique_ptr<ZmqSocket> monitor)
    : options_(options), context_(std::move(context)), socket_(std::move(socket)), monitor_(std::move(monitor)) {}

Client::~Client() {
  monitor_.reset();
  socket_.reset();  // before the context
  context_.reset();
}

bool Client::ConnectionDropped() {
  bool dropped = false;
  for (;;) {
    StatusOr<Frames> event = monitor_->Receive(std::chrono::milliseconds(0));
    if (!event.ok()) return dropped;
    if (event->empty() || event->front().size() < sizeof(uint16_t)) continue;
    uint16_t id = 0;  // frame 1: event id (16 bits, host order), value (32 bits); frame 2: endpoint
    std::memcpy(&id, event->front().data(), sizeof(id));
    if (id == ZMQ_EVENT_HANDSHAKE_SUCCEEDED) {
      is_session_up_ = true;
    } else if (id == ZMQ_EVENT_DISCONNECTED && is_session_up_) {
      // (A connection that never completed its handshake, e.g. a refused CURVE key, carried nothing.)
      is_session_up_ = false;
      dropped = true;
    }
  }
}

Status Client::Send(ClientMessage message) {
  message.api_key = options_.api_key;
  last_sent_ = std::chrono::steady_clock::now();
  return socket_->Send({proto::EncodeClientMessage(message)}, options_.timeout);
}

Status Client::SendRaw(const std::string& bytes) { return socket_->Send({bytes}, options_.timeout); }

StatusOr<uint64_t> Client::Start(const proto::GenerateRequest& request) {
  ClientMessage message;
  message.request_id = next_request_id_++;
  message.kind = ClientMessageKind::kGenerate;
  message.generate = request;
  (void)ConnectionDropped();  // a drop before this request does not concern it
  RETURN_IF_ERROR(Send(std::move(message)));
  return next_request_id_ - 1;
}

Status Client::Cancel(uint64_t request_id) {
  ClientMessage message;
  message.request_id = request_id;
  message.kind = ClientMessageKind::kCancel;
  return Send(std::move(message));
}

StatusOr<ServerMessage> Client::Receive(std::chrono::milliseconds timeout) {
  if (!inbox_.empty()) {
    ServerMessage message = std::move(inbox_.front());
    inbox_.pop_front();
    return message;
  }
  return ReceiveFromSocket(timeout);
}

StatusOr<ServerMessage> Client::ReceiveFromSocket(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    const auto now = std::chrono::steady_clock::now();
    if (now - last_sent_ >= options_.heartbeat_interval) {
      ClientMessage heartbeat;
      heartbeat.kind = ClientMessageKind::kHeartbeat;
      RETURN_IF_ERROR(Send(std::move(heartbeat)));
    }
    if (now >= deadline) return DeadlineExceeded("no reply from " + options_.server);
    auto wait = std::min(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now),
                         options_.heartbeat_interval);
    ASSIGN_OR_RETURN(std::vector<bool> readable, PollReadable({socket_.get(), monitor_.get()}, wait));
    if (readable[1] && ConnectionDropped()) {
      return Unavailable("connection to the coordinator at " + options_.server +
                         " lost: the requests in flight on it are gone with it (it holds request state); send them "
                         "again (with a seed, the same tokens)");
    }
    if (!readable[0]) continue;
    StatusOr<Frames> frames = socket_->Receive(std::chrono::milliseconds(0));
    if (!frames.ok()) {
      if (frames.status().code() == StatusCode::kDeadlineExceeded) continue;
      return frames.status();
    }
    if (frames->size() != 1) continue;
    StatusOr<ServerMessage> message = proto::DecodeServerMessage((*frames)[0].data(), (*frames)[0].size());
    if (message.ok()) return message;
  }
}

StatusOr<ServerMessage> Client::Await(uint64_t request_id, ServerMessageKind kind) {
  while (true) {
    ASSIGN_OR_RETURN(ServerMessage message, ReceiveFromSocket(options_.timeout));
    if (message.kind == ServerMessageKind::kError && message.request_id == request_id) {
      return StatusFromError(message.error);
    }
    if (message.request_id == request_id && message.kind == kind) return message;
    inbox_.push_back(std::move(message));
  }
}

StatusOr<proto::HealthReply> Client::Health() {
  ClientMessage message;
  message.request_id = next_request_id_++;
  message.kind = ClientMessageKind::kHealth;
  (void)ConnectionDropped();
  RETURN_IF_ERROR(Send(message));
  ASSIGN_OR_RETURN(ServerMessage reply, Await(message.request_id, ServerMessageKind::kHealth));
  return reply.health;
}

StatusOr<proto::StatsReply> Client::Stats() {
  ClientMessage message;
  message.request_id = next_request_id_++;
  message.kind = ClientMessageKind::kStats;
  (void)ConnectionDropped();
  RETURN_IF_ERROR(Send(message));
  ASSIGN_OR_RETURN(ServerMessage reply, Await(message.request_id, ServerMessageKind::kStats));
  return reply.stats;
}

StatusOr<GenerateResult> Client::Generate(const proto::GenerateRequest& request,
                                          const std::function<bool(const proto::TokenChunk&)>& on_chunk) {
  ASSIGN_OR_RETURN(uint64_t request_id, Start(request));
  const uint32_t n = std::max<uint32_t>(request.n, 1);
  GenerateResult result;
  result.token_ids.resize(n);
  result.text.resize(n);
  result.finish.resize(n);
  result.logprobs.resize(n);
  std::vector<bool> is_finished(n, false);
  uint32_t num_finished = 0;
  bool cancel_sent = false;
  while (num_finished < n) {
    // A fresh request id: none of its messages can be in inbox_ yet.
    ASSIGN_OR_RETURN(ServerMessage message, ReceiveFromSocket(options_.timeout));
    if (message.request_id != request_id) {
      inbox_.push_back(std::move(message));
      continue;
    }
    switch (message.kind) {
      case ServerMessageKind::kChunk: {
        const proto::TokenChunk& chunk = message.chunk;
        if (chunk.sample_index >= n) return Internal("chunk for sample " + std::to_string(chunk.sample_index));
        auto& ids = result.token_ids[chunk.sample_index];
        ids.insert(ids.end(), chunk.token_ids.begin(), chunk.token_ids.end());
        result.text[chunk.sample_index] += chunk.text;
        auto& lps = result.logprobs[chunk.sample_index];
        lps.insert(lps.end(), chunk.logprobs.begin(), chunk.logprobs.end());
        if (on_chunk && !on_chunk(chunk) && !cancel_sent) {
          RETURN_IF_ERROR(Cancel(request_id));
          cancel_sent = true;
        }
        break;
      }
      case ServerMessageKind::kFinish:
        if (message.finish.sample_index >= n) return Internal("finish for an unknown sample");
        if (!is_finished[message.finish.sample_index]) {
          is_finished[message.finish.sample_index] = true;
          ++num_finished;
        }
        result.finish[message.finish.sample_index] = message.finish;
        break;
      case ServerMessageKind::kPromptLogprobs:
        result.has_prompt_logprobs = true;
        result.prompt_logprobs = std::move(message.prompt_logprobs);
        break;
      case ServerMessageKind::kError:
        return StatusFromError(message.error);
      default:
        break;
    }
  }
  return result;
}

}  // namespace tpserve
