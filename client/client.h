// Client: the C++ client library of tpserve. One DEALER socket to a coordinator's client endpoint,
// speaking comm/schema/client.capnp through comm/client_codec.h.
//
// Two ways to use it:
//  - blocking: Generate(request, on_chunk) streams chunks to the callback and returns the whole
//    result (or the server's typed error as a Status); Health(), Stats().
//  - asynchronous, for many requests on one connection: Start() sends a request and returns its
//    id, Receive() returns the next server message of any request, Cancel() cancels one.
// While waiting, the client sends a heartbeat every ClientOptions::heartbeat_interval so the
// coordinator knows it is still there (a client that goes silent has its requests cancelled).
// The coordinator holds request state: when the connection drops (it died or restarted), a wait
// for replies ends at once with UNAVAILABLE ("connection ... lost"), not at the timeout; the
// requests sent before are gone (send them again: with their seed, the same tokens). The socket
// reconnects by itself for later requests.
// Not thread-safe: one thread per Client (make several Clients for several threads).
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "comm/client_codec.h"
#include "common/status.h"

namespace zmq {
class context_t;
}

namespace tpserve {

class ZmqSocket;

struct ClientOptions {
  std::string server = "tcp://127.0.0.1:5555";
  std::string api_key;
  // CURVE: the key directory (comm/curve_keys.h) and this client's key name ("": the only or
  // "default" pair under DIR/clients). keys_dir "": plain TCP.
  std::string keys_dir;
  std::string key_name;
  // How long a blocking call waits for the next server message before DEADLINE_EXCEEDED.
  std::chrono::milliseconds timeout{60000};
  std::chrono::milliseconds heartbeat_interval{2000};
};

// The outcome of one generate request, per sample (index = sample index).
struct GenerateResult {
  std::vector<std::vector<int32_t>> token_ids;  // [n][O_i]
  std::vector<std::string> text;                // [n]
  std::vector<proto::Finish> finish;            // [n]
  std::vector<std::vector<proto::TokenLogprobs>> logprobs;  // [n][O_i] when asked
  // With request.prompt_logprobs: the prompt as the model saw it and each token's logprob after
  // the first (sent once per request, before its first chunk).
  bool has_prompt_logprobs = false;
  proto::PromptLogprobs prompt_logprobs;
};

// The Status a typed server error becomes: invalid_request → INVALID_ARGUMENT, prompt_too_long →
// OUT_OF_RANGE, overloaded → RESOURCE_EXHAUSTED, cancelled → CANCELLED, worker_lost → UNAVAILABLE,
// unauthenticated → UNAUTHENTICATED, internal → INTERNAL; the message is "<kind>: <server message>".
Status StatusFromError(const proto::ErrorReply& error);

class Client {
 public:
  // Connects (asynchronously: a missing server shows up as DEADLINE_EXCEEDED on the first call).
  static StatusOr<std::unique_ptr<Client>> Connect(const ClientOptions& options);
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // Sends the request and waits for its end. on_chunk (optional) sees every chunk as it arrives;
  // returning false from it cancels the request (the result then ends with reason cancelled).
  StatusOr<GenerateResult> Generate(const proto::GenerateRequest& request,
                                    const std::function<bool(const proto::TokenChunk&)>& on_chunk = {});
  StatusOr<proto::HealthReply> Health();
  StatusOr<proto::StatsReply> Stats();

  // --- asynchronous use ---
  // Sends a generate request; returns its request id (unique on this client).
  StatusOr<uint64_t> Start(const proto::GenerateRequest& request);
  Status Cancel(uint64_t request_id);
  // The next message from the server (any request), waiting up to `timeout`; sends heartbeats
  // meanwhile. DEADLINE_EXCEEDED when none arrived; messages that do not decode are skipped.
  StatusOr<proto::ServerMessage> Receive(std::chrono::milliseconds timeout);
  // Sends raw bytes as one frame (tests: malformed messages).
  Status SendRaw(const std::string& bytes);

  const ClientOptions& options() const { return options_; }

 private:
  Client(const ClientOptions& options, std::unique_ptr<zmq::context_t> context,
         std::unique_ptr<ZmqSocket> socket, std::unique_ptr<ZmqSocket> monitor);
  // Whether an established connection dropped since the last call (drains the monitor's events).
  bool ConnectionDropped();
  Status Send(proto::ClientMessage message);
  StatusOr<proto::ServerMessage> ReceiveFromSocket(std::chrono::milliseconds timeout);
  // Waits for the reply of kind `kind` to request_id; other messages wait in inbox_ for Receive.
  StatusOr<proto::ServerMessage> Await(uint64_t request_id, proto::ServerMessageKind kind);

  ClientOptions options_;
  std::unique_ptr<zmq::context_t> context_;
  std::unique_ptr<ZmqSocket> socket_;
  std::unique_ptr<ZmqSocket> monitor_;  // socket_'s handshake and disconnection events
  bool is_session_up_ = false;          // a handshake completed since the last disconnection
  std::deque<proto::ServerMessage> inbox_;  // received while awaiting another reply
  uint64_t next_request_id_ = 1;
  std::chrono::steady_clock::time_point last_sent_;
};

}  // namespace tpserve
