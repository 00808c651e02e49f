// Server: the coordinator process's event loop. Two ZeroMQ ROUTER sockets — clients
// (comm/schema/client.capnp) and worker-group leaders (comm/schema/worker.capnp) — and, per
// registered group, a Scheduler. One thread does everything, so request state needs no locks:
//
//   loop:
//     wait for a message or the next deadline
//     client messages  → validate, tokenize, Scheduler::Add on the least-loaded group | cancel |
//                        health | stats | heartbeat
//     worker messages  → Hello (register), StepResult → Postprocess → stream events, heartbeats
//     each idle group  → plan = scheduler.Schedule(); send plan            (the engine step)
//     deadlines        → lost groups (their requests replayed), silent clients (cancel)
//     a scrape waits   → render the metrics (coordinator/server_metrics.h) for the HTTP thread
//
// Robustness: a malformed, oversized or unknown message is dropped and counted (or answered with a
// typed error when it names a request), never a crash; a send to a vanished client cancels its
// requests, freeing their KV blocks by the next step; a lost group's requests are replayed on
// another group (or the next to register), the client seeing only a pause in its stream, and the
// server keeps serving (`worker_lost` only past ServerOptions::max_replays or replay_wait). RequestDrain() (SIGTERM) refuses new requests, lets the
// running ones finish, shuts the groups down and makes Run() return OK.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "comm/client_codec.h"
#include "comm/worker_message.h"
#include "common/status.h"
#include "coordinator/metrics_exchange.h"
#include "coordinator/metrics_http_server.h"
#include "coordinator/prompt_builder.h"
#include "coordinator/request_stream.h"
#include "coordinator/request_validation.h"
#include "coordinator/scheduler_config.h"
#include "coordinator/server_metrics.h"
#include "coordinator/worker_group_link.h"
#include "model/tokenizer.h"

namespace zmq {
class context_t;
}

namespace tpserve {

class ZmqSocket;
class ZapAuthenticator;

struct ServerOptions {
  std::string client_endpoint = "tcp://127.0.0.1:5555";
  std::string worker_endpoint = "tcp://127.0.0.1:5556";
  // CURVE key directory (comm/curve_keys.h): both sockets encrypt, and admit only the listed client
  // and worker-group keys. Without it, binding a non-loopback endpoint is refused unless insecure.
  std::string keys_dir;
  bool insecure = false;
  SchedulerConfig scheduler;
  std::string model_name;
  ModelLimits limits;         // vocab size and context length of the served model
  int32_t eos_id = -1;
  // End-of-turn token (ChatML <|im_end|>): like tpserve-run, every request stops on it too
  // (unless ignore_eos). -1: the chat format's, as the tokenizer knows it.
  int32_t eot_id = -1;
  // When set, a Hello whose fingerprint differs is refused (the group serves another model).
  std::optional<ModelFingerprint> model_fingerprint;
  std::vector<std::string> api_keys;  // empty: no authentication
  std::chrono::milliseconds step_timeout{60000};
  // Heartbeats both ways; a group silent for heartbeat_timeout (no beat, echo or result) is lost:
  // with the defaults a dead, stopped or unreachable leader is noticed within 2.5 s.
  std::chrono::milliseconds heartbeat_interval{500};
  std::chrono::milliseconds heartbeat_timeout{2500};
  // Replay: the requests of a lost group are re-run (prompt ++ the tokens already streamed,
  // re-prefilled; the same tokens follow, see README) on the least-loaded group, or on the next
  // group to register, at most max_replays times each; past that, or after waiting replay_wait
  // for a group, the client gets worker_lost.
  int32_t max_replays = 3;
  // Speculative decoding for requests that do not choose (GenerateRequest.speculative absent or
  // serverDefault): off, or prompt lookup with k proposals (`--speculative ngram:4`).
  SpeculativeConfig speculative;
  std::chrono::milliseconds replay_wait{60000};
  // A client silent this long (no message, no heartbeat) has its requests cancelled (0: never).
  std::chrono::milliseconds client_timeout{30000};
  // Largest queued + running requests over all groups before `overloaded`.
  int32_t max_live_requests = 1024;
  // GET /metrics over HTTP on metrics_host:metrics_port (0: a free port; -1: not served; the
  // `metrics` client request answers either way).
  std::string metrics_host = "127.0.0.1";
  int metrics_port = -1;
};

class Server {
 public:
  // Binds both endpoints. `tokenizer` may be null (token-id prompts only) and must outlive the server.
  static StatusOr<std::unique_ptr<Server>> Create(const ServerOptions& options, const Tokenizer* tokenizer);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // The bound endpoints (ports resolved), e.g. "tcp://0.0.0.0:5555".
  const std::string& client_endpoint() const;
  const std::string& worker_endpoint() const;
  // The bound metrics port, or -1 when not served.
  int metrics_port() const { return metrics_http_ ? metrics_http_->port() : -1; }

  // Serves until drained (OK) or stopped (OK), or the sockets fail (UNAVAILABLE).
  Status Run();
  // Thread- and signal-safe.
  void RequestDrain() { drain_requested_.store(true); }
  void RequestStop() { stop_requested_.store(true); }

 private:
  using Clock = std::chrono::steady_clock;

  struct LiveRequest {
    std::string client_id;  // ROUTER routing id of the client
    uint32_t group_id = 0;  // 0: parked in orphans_ (its group was lost, none serves)
    std::unique_ptr<RequestStream> stream;
  };

  Server(const ServerOptions& options, const Tokenizer* tokenizer);

  // --- clients ---
  void HandleClientFrames(std::vector<std::string> frames);
  void HandleGenerate(const std::string& client_id, const proto::ClientMessage& message);
  void HandleCancel(const std::string& client_id, uint64_t client_request_id);
  proto::StatsReply MakeStats() const;
  proto::HealthReply MakeHealth() const;
  // Sends to a client; a failed send (client gone) cancels all its requests.
  void SendToClient(const std::string& client_id, const proto::ServerMessage& message);
  void Reject(const std::string& client_id, uint64_t client_request_id, const Status& status);
  // kUnavailable: no worker group serves (none registered yet, or draining).
  void RejectUnavailable(const std::string& client_id, uint64_t client_request_id, std::string why);
  void DropClient(const std::string& client_id);
  void ExpireSilentClients(Clock::time_point now);

  // --- worker groups ---
  void HandleWorkerFrames(std::vector<std::string> frames);
  void HandleHello(const std::string& routing_id, const HelloMessage& hello);
  void HandleStepResult(WorkerGroupLink& group, const StepResult& result);
  Status SendToWorker(const std::string& routing_id, const WorkerMessage& message);
  void StartSteps();
  void Stream(WorkerGroupLink& group, const std::vector<SequenceEvent>& events);
  // A non-fatal step error from the group: the plan's requests fail, the group serves on.
  void FailStep(WorkerGroupLink& group, const Status& error);
  // Forgets a lost group; its requests are replayed (Replay). The group is told to shut down unless
  // it is registering again (its routing id now names the new connection).
  void LoseGroup(uint32_t group_id, const std::string& why, bool is_reregistering = false);
  // Re-runs a request of a lost group on the least-loaded group, or parks it until one registers;
  // worker_lost past max_replays.
  void Replay(ReleasedRequest request, const std::string& why, Clock::time_point now);
  void AdoptOn(WorkerGroupLink& group, ReleasedRequest request);
  // Parked requests go to the groups now serving; those parked longer than replay_wait fail.
  void AdoptOrphans();
  void ExpireOrphans(Clock::time_point now);
  // Ends a live request with an error reply.
  void FailRequest(uint64_t request_id, proto::ErrorKind kind, const std::string& message);
  void CheckGroups(Clock::time_point now);
  WorkerGroupLink* FindGroupByRoutingId(const std::string& routing_id);
  WorkerGroupLink* LeastLoadedGroup();

  // Ends a request everywhere: scheduler (if still live), maps.
  void ForgetRequest(uint64_t request_id);
  void ShutdownGroups(const std::string& reason);

  ServerOptions options_;
  const Tokenizer* tokenizer_;
  PromptBuilder prompt_builder_;
  std::unique_ptr<zmq::context_t> context_;
  std::unique_ptr<ZapAuthenticator> zap_;  // CURVE only; stops before the context ends
  std::unique_ptr<ZmqSocket> client_socket_;
  std::unique_ptr<ZmqSocket> worker_socket_;

  std::map<uint32_t, std::unique_ptr<WorkerGroupLink>> groups_;  // by group id
  uint32_t next_group_id_ = 1;
  std::map<uint64_t, LiveRequest> requests_;  // by scheduler request id
  // Requests of lost groups waiting for a group to replay them on (no group serves), oldest first.
  struct Orphan {
    ReleasedRequest request;
    Clock::time_point since;
  };
  std::vector<Orphan> orphans_;
  std::map<std::pair<std::string, uint64_t>, uint64_t> request_by_client_;  // (client, its id) → ours
  std::map<std::string, Clock::time_point> client_last_seen_;
  uint64_t next_request_id_ = 1;

  std::atomic<bool> drain_requested_{false};
  std::atomic<bool> stop_requested_{false};
  bool is_draining_ = false;

  // Counters for stats.
  uint64_t num_requests_total_ = 0;
  uint64_t num_requests_finished_ = 0;
  uint64_t num_requests_rejected_ = 0;
  uint64_t num_messages_dropped_ = 0;
  uint64_t num_steps_total_ = 0;
  uint64_t num_replays_total_ = 0;
  uint64_t num_generated_tokens_ = 0;
  // Tokens per second over a sliding window of recent steps: (time, tokens).
  std::vector<std::pair<Clock::time_point, int64_t>> recent_tokens_;

  ServerMetrics metrics_;
  MetricsExchange metrics_exchange_;                // the loop → the HTTP thread
  std::unique_ptr<MetricsHttpServer> metrics_http_;  // declared last: stopped first
};

}  // namespace tpserve
