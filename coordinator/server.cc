#include "coordinator/server.h"

#include "comm/curve_keys.h"
#include "comm/zap_authenticator.h"

#include <algorithm>
#include <zmq.hpp>

#include "comm/zmq_transport.h"
#include "common/logging.h"
#include "coordinator/tokenizer_requests.h"

namespace tpserve {
namespace {

constexpr std::chrono::milliseconds kSendTimeout{0};  // never block the loop on one peer
constexpr int kMaxMessagesPerPoll = 256;              // fairness between the two sockets
constexpr auto kThroughputWindow = std::chrono::seconds(10);

proto::ServerMessage ReplyTo(uint64_t request_id, proto::ServerMessageKind kind) {
  proto::ServerMessage m;
  m.request_id = request_id;
  m.kind = kind;
  return m;
}

}  // namespace

Server::Server(const ServerOptions& options, const Tokenizer* tokenizer)
    : options_(options), tokenizer_(tokenizer), prompt_builder_(tokenizer), metrics_(options.model_name) {}

Server::~Server() {
  metrics_http_.reset();
  client_socket_.reset();
  worker_socket_.reset();
  zap_.reset();
  context_.reset();
}

namespace {

// CURVE on both sockets when there is a key directory (its ZAP handler admitting the listed keys);
// otherwise plain TCP, which is refused on a non-loopback endpoint unless options.insecure.
StatusOr<std::unique_ptr<ZapAuthenticator>> SecureSockets(const ServerOptions& options, zmq::context_t& context,
                                                          SocketOptions* client_options, SocketOptions* worker_options) {
  if (options.keys_dir.empty()) {
    for (const std::string& endpoint : {options.client_endpoint, options.worker_endpoint}) {
      if (IsLoopbackEndpoint(endpoint)) continue;
      if (!options.insecure) {
        return FailedPrecondition(
            "refusing to bind " + endpoint + " unencrypted and unauthenticated: make keys with `tpserve keys init DIR` "
            "and pass --keys DIR (clients and worker groups get theirs from DIR), or pass --insecure to accept the risk");
      }
      LOG(WARN) << "coordinator: --insecure: " << endpoint
                << " is open to anyone who can reach it, unencrypted (no --keys)";
    }
    return std::unique_ptr<ZapAuthenticator>();
  }
  ASSIGN_OR_RETURN(CurveServerKeys keys, LoadCurveServerKeys(options.keys_dir));
  ASSIGN_OR_RETURN(std::unique_ptr<ZapAuthenticator> zap,
                   ZapAuthenticator::Start(context, {{"clients", keys.client_public_keys},
                                                     {"workers", keys.worker_public_keys}}));
  for (auto [socket_options, domain] : {std::pair{client_options, "clients"}, std::pair{worker_options, "workers"}}) {
    socket_options->curve_server = true;
    socket_options->curve_secret_key = keys.server.secret_key;
    socket_options->zap_domain = domain;
  }
  LOG(INFO) << "coordinator: CURVE on, " << keys.client_public_keys.size() << " client key(s), "
            << keys.worker_public_keys.size() << " worker key(s) from " << options.keys_dir;
  return zap;
}

}  // namespace

StatusOr<std::unique_ptr<Server>> Server::Create(const ServerOptions& options, const Tokenizer* tokenizer) {
  if (options.limits.vocab_size <= 0 || options.limits.context_length <= 1) {
    return InvalidArgument("server needs the model's vocab size and context length");
  }
  std::unique_ptr<Server> server(new Server(options, tokenizer));
  server->context_ = std::make_unique<zmq::context_t>(1);
  SocketOptions client_options, worker_options;
  ASSIGN_OR_RETURN(server->zap_, SecureSockets(options, *server->context_, &client_options, &worker_options));
  client_options.max_message_bytes = proto::kMaxClientMessageBytes;
  client_options.send_hwm = 100000;
  client_options.recv_hwm = 10000;
  client_options.router_mandatory = true;
  ASSIGN_OR_RETURN(server->client_socket_, ZmqSocket::Bind(*server->context_, zmq::socket_type::router,
                                                           options.client_endpoint, client_options));
  worker_options.max_message_bytes = int64_t{256} << 20;  // step results with logits (tests)
  worker_options.router_mandatory = true;
  worker_options.router_handover = true;  // a group registering again (it lost us) takes its id back
  ASSIGN_OR_RETURN(server->worker_socket_, ZmqSocket::Bind(*server->context_, zmq::socket_type::router,
                                                           options.worker_endpoint, worker_options));
  if (options.metrics_port >= 0) {
    Server* raw = server.get();
    ASSIGN_OR_RETURN(server->metrics_http_,
                     MetricsHttpServer::Start(options.metrics_host, options.metrics_port, [raw] {
                       return raw->metrics_exchange_.Fetch(std::chrono::seconds(2));
                     }));
  }
  LOG(INFO) << "coordinator: clients on " << server->client_endpoint() << ", workers on "
            << server->worker_endpoint();
  return server;
}

const std::string& Server::client_endpoint() const { return client_socket_->endpoint(); }
const std::string& Server::worker_endpoint() const { return worker_socket_->endpoint(); }

// ---------------------------------------------------------------------------------------------
// The loop

Status Server::Run() {
  int num_poll_failures = 0;
  while (!stop_requested_.load()) {
    if (drain_requested_.load() && !is_draining_) {
      is_draining_ = true;
      LOG(INFO) << "coordinator: draining (" << requests_.size() << " requests running)";
    }
    if (is_draining_ && requests_.empty()) break;

    StatusOr<std::vector<bool>> polled =
        PollReadable({client_socket_.get(), worker_socket_.get()}, std::chrono::milliseconds(20));
    if (!polled.ok()) {
      // A signal (SIGTERM → drain) interrupts poll with EINTR; anything persistent is fatal.
      if (++num_poll_failures > 100) return polled.status();
      continue;
    }
    num_poll_failures = 0;
    const std::vector<bool>& readable = *polled;
    is_draining_ = is_draining_ || drain_requested_.load();  // before reading: a request sent after
                                                             // RequestDrain() returns is refused
    for (int i = 0; i < kMaxMessagesPerPoll && readable[1]; ++i) {
      StatusOr<Frames> frames = worker_socket_->Receive(std::chrono::milliseconds(0));
      if (!frames.ok()) break;
      HandleWorkerFrames(std::move(*frames));
    }
    for (int i = 0; i < kMaxMessagesPerPoll && readable[0]; ++i) {
      StatusOr<Frames> frames = client_socket_->Receive(std::chrono::milliseconds(0));
      if (!frames.ok()) break;
      HandleClientFrames(std::move(*frames));
    }
    const Clock::time_point now = Clock::now();
    CheckGroups(now);
    ExpireSilentClients(now);
    StartSteps();
    if (metrics_exchange_.is_wanted()) metrics_exchange_.Publish(metrics_.Render(groups_));
  }
  ShutdownGroups(stop_requested_.load() ? "coordinator stopped" : "coordinator drained");
  LOG(INFO) << "coordinator: exiting";
  return OkStatus();
}

// ---------------------------------------------------------------------------------------------
// Clients

void Server::HandleClientFrames(std::vector<std::string> frames) {
  if (frames.size() != 2) {  // [routing id, message]
    ++num_messages_dropped_;
    return;
  }
  const std::string& client_id = frames[0];
  StatusOr<proto::ClientMessage> decoded = proto::DecodeClientMessage(frames[1].data(), frames[1].size());
  if (!decoded.ok()) {
    ++num_messages_dropped_;
    metrics_.OnFailed(0, proto::ErrorKind::kInvalidRequest);
    // Answer so a well-meaning client learns why; request id 0: we could not read one.
    SendToClient(client_id, proto::MakeErrorMessage(0, proto::ErrorKind::kInvalidRequest, decoded.status().message()));
    return;
  }
  const proto::ClientMessage& message = *decoded;
  if (options_.client_timeout.count() > 0) client_last_seen_[client_id] = Clock::now();
  if (message.version != proto::kClientProtocolVersion) {
    Reject(client_id, message.request_id,
           InvalidArgument("protocol version " + std::to_string(message.version) + " is not spoken here (expected " +
                           std::to_string(proto::kClientProtocolVersion) + ")"));
    return;
  }
  if (!options_.api_keys.empty() &&
      std::find(options_.api_keys.begin(), options_.api_keys.end(), message.api_key) == options_.api_keys.end()) {
    if (message.kind != proto::ClientMessageKind::kHeartbeat) {
      Reject(client_id, message.request_id, Status(StatusCode::kUnauthenticated, "missing or unknown API key"));
    }
    return;
  }
  switch (message.kind) {
    case proto::ClientMessageKind::kGenerate: HandleGenerate(client_id, message); break;
    case proto::ClientMessageKind::kCancel: HandleCancel(client_id, message.request_id); break;
    case proto::ClientMessageKind::kHealth: {
      proto::ServerMessage reply = ReplyTo(message.request_id, proto::ServerMessageKind::kHealth);
      reply.health = MakeHealth();
      SendToClient(client_id, reply);
      break;
    }
    case proto::ClientMessageKind::kStats: {
      proto::ServerMessage reply = ReplyTo(message.request_id, proto::ServerMessageKind::kStats);
      reply.stats = MakeStats();
      SendToClient(client_id, reply);
      break;
    }
    case proto::ClientMessageKind::kHeartbeat: break;
    case proto::ClientMessageKind::kMetrics: {
      proto::ServerMessage reply = ReplyTo(message.request_id, proto::ServerMessageKind::kMetrics);
      reply.metrics.text = metrics_.Render(groups_);
      SendToClient(client_id, reply);
      break;
    }
    case proto::ClientMessageKind::kTokenize:
    case proto::ClientMessageKind::kDetokenize:
      SendToClient(client_id, AnswerTokenizerRequest(message, prompt_builder_, tokenizer_, options_.limits));
      break;
  }
}

void Server::Reject(const std::string& client_id, uint64_t client_request_id, const Status& status) {
  ++num_requests_rejected_;
  metrics_.OnFailed(0, proto::ErrorKindFromStatus(status));
  SendToClient(client_id,
               proto::MakeErrorMessage(client_request_id, proto::ErrorKindFromStatus(status), status.message()));
}

void Server::RejectUnavailable(const std::string& client_id, uint64_t client_request_id, std::string why) {
  ++num_requests_rejected_;
  metrics_.OnFailed(0, proto::ErrorKind::kUnavailable);
  SendToClient(client_id, proto::MakeErrorMessage(client_request_id, proto::ErrorKind::kUnavailable, std::move(why)));
}

void Server::HandleGenerate(const std::string& client_id, const proto::ClientMessage& message) {
  const Clock::time_point arrival = Clock::now();
  ++num_requests_total_;
  const uint64_t client_request_id = message.request_id;
  if (request_by_client_.count({client_id, client_request_id})) {
    Reject(client_id, client_request_id, InvalidArgument("request id " + std::to_string(client_request_id) +
                                                         " is already in flight on this connection"));
    return;
  }
  if (is_draining_) {
    RejectUnavailable(client_id, client_request_id, "the server is draining; send the request elsewhere");
    return;
  }
  if (static_cast<int32_t>(requests_.size()) >= options_.max_live_requests) {
    Reject(client_id, client_request_id, ResourceExhausted("too many requests in flight; retry later"));
    return;
  }
  const proto::GenerateRequest& request = message.generate;
  Status valid = ValidateGenerateRequest(request, options_.limits);
  if (!valid.ok()) return Reject(client_id, client_request_id, valid);
  StatusOr<std::vector<int32_t>> prompt = prompt_builder_.Build(request);
  if (!prompt.ok()) return Reject(client_id, client_request_id, prompt.status());
  valid = ValidatePromptLength(*prompt, options_.limits);
  if (!valid.ok()) return Reject(client_id, client_request_id, valid);
  WorkerGroupLink* group = LeastLoadedGroup();
  if (group == nullptr) {
    RejectUnavailable(client_id, client_request_id, "no worker group is registered yet; retry later");
    return;
  }

  ScheduleRequest schedule;
  schedule.request_id = next_request_id_;
  schedule.prompt_ids = std::move(*prompt);
  schedule.sampling = request.sampling;
  if (!schedule.sampling.has_seed) {
    schedule.sampling.seed = DrawRequestSeed();
    schedule.sampling.has_seed = true;
  }
  schedule.stopping.max_tokens = static_cast<int32_t>(std::min<uint32_t>(request.max_tokens, 1u << 30));
  schedule.stopping.stop_token_ids = request.stop_token_ids;
  schedule.stopping.ignore_eos = request.ignore_eos;
  schedule.stopping.eos_token_id = options_.eos_id;
  const int32_t eot_id = options_.eot_id >= 0 ? options_.eot_id : prompt_builder_.end_of_turn_id();
  if (eot_id >= 0 && eot_id != options_.eos_id && !request.ignore_eos) {
    schedule.stopping.stop_token_ids.push_back(eot_id);
  }
  schedule.num_samples = static_cast<int32_t>(request.n);
  schedule.priority = request.priority;
  schedule.prompt_logprobs = request.prompt_logprobs;
  // A beam search does not take the server's default speculation (it asks for none itself).
  const bool default_speculation = request.speculative.method == proto::SpeculativeChoice::kServerDefault;
  if (!request.beam.enabled() || !default_speculation) {
    schedule.speculative = ResolveSpeculative(request.speculative, options_.speculative);
  }
  schedule.beam = request.beam;
  const uint64_t seed = schedule.sampling.seed;
  const int32_t num_prompt_tokens = static_cast<int32_t>(schedule.prompt_ids.size());
  Status added = group->scheduler().Add(std::move(schedule));
  if (!added.ok()) return Reject(client_id, client_request_id, added);

  LiveRequest live;
  live.client_id = client_id;
  live.group_id = group->group_id();
  live.stream = std::make_unique<RequestStream>(client_request_id, request, seed, tokenizer_);
  requests_.emplace(next_request_id_, std::move(live));
  request_by_client_[{client_id, client_request_id}] = next_request_id_;
  metrics_.OnArrival(next_request_id_, num_prompt_tokens, arrival);
  ++next_request_id_;
}

void Server::HandleCancel(const std::string& client_id, uint64_t client_request_id) {
  auto it = request_by_client_.find({client_id, client_request_id});
  if (it == request_by_client_.end()) return;  // finished already, or never existed
  const uint64_t request_id = it->second;
  LiveRequest& live = requests_.at(request_id);
  auto group_it = groups_.find(live.group_id);
  std::vector<proto::ServerMessage> messages;
  for (int32_t i = 0; i < live.stream->num_samples(); ++i) {
    if (live.stream->is_sample_finished(i)) continue;
    SampleUsage usage;
    if (group_it != groups_.end()) {
      const Sequence* seq = group_it->second->scheduler().FindSequence(SequenceIdOf(request_id, i));
      if (seq != nullptr) usage = UsageOf(*seq);
    }
    for (auto& m : live.stream->FinishSample(i, proto::FinishReason::kCancelled, usage)) messages.push_back(std::move(m));
  }
  metrics_.OnFinished(request_id, FinishReason::kCancelled, Clock::now());
  ForgetRequest(request_id);
  for (const auto& m : messages) SendToClient(client_id, m);
}

void Server::SendToClient(const std::string& client_id, const proto::ServerMessage& message) {
  Status sent = client_socket_->Send({client_id, proto::EncodeServerMessage(message)}, kSendTimeout);
  if (!sent.ok()) {
    LOG(INFO) << "coordinator: client gone or not reading (" << sent.ToString() << "); cancelling its requests";
    DropClient(client_id);
  }
}

void Server::DropClient(const std::string& client_id) {
  std::vector<uint64_t> ids;
  for (auto it = request_by_client_.lower_bound({client_id, 0});
       it != request_by_client_.end() && it->first.first == client_id; ++it) {
    ids.push_back(it->second);
  }
  const Clock::time_point now = Clock::now();
  for (uint64_t id : ids) {
    metrics_.OnFinished(id, FinishReason::kCancelled, now);  // by a client that is gone
    ForgetRequest(id);
  }
  client_last_seen_.erase(client_id);
}

void Server::ExpireSilentClients(Clock::time_point now) {
  if (options_.client_timeout.count() <= 0) return;
  std::vector<std::string> silent;
  for (const auto& [client_id, seen] : client_last_seen_) {
    if (now - seen > options_.client_timeout) silent.push_back(client_id);
  }
  for (const std::string& client_id : silent) {
    bool has_requests = false;
    auto it = request_by_client_.lower_bound({client_id, 0});
    has_requests = it != request_by_client_.end() && it->first.first == client_id;
    if (has_requests) {
      LOG(INFO) << "coordinator: client silent for too long; cancelling its requests";
    }
    DropClient(client_id);
  }
}

void Server::ForgetRequest(uint64_t request_id) {
  auto it = requests_.find(request_id);
  if (it == requests_.end()) return;
  auto group_it = groups_.find(it->second.group_id);
  if (group_it != groups_.end()) (void)group_it->second->scheduler().AbortRequest(request_id);
  std::erase_if(orphans_, [request_id](const Orphan& orphan) { return orphan.request.request_id == request_id; });
  request_by_client_.erase({it->second.client_id, it->second.stream->client_request_id()});
  requests_.erase(it);
}

proto::HealthReply Server::MakeHealth() const {
  proto::HealthReply h;
  h.num_worker_groups = static_cast<uint32_t>(groups_.size());
  h.draining = is_draining_;
  h.ok = !groups_.empty() && !is_draining_;
  h.model_name = options_.model_name;
  h.vocab_size = static_cast<uint32_t>(options_.limits.vocab_size);
  h.context_length = static_cast<uint32_t>(options_.limits.context_length);
  for (const auto& [id, group] : groups_) {
    const HelloMessage& hello = group->hello();
    h.kv_tokens += static_cast<uint64_t>(hello.num_blocks / hello.kv_groups.num_groups()) * hello.block_size;
    const bool listed = ("," + h.kv_dtype + ",").find("," + hello.kv_dtype + ",") != std::string::npos;
    if (!listed) h.kv_dtype += (h.kv_dtype.empty() ? "" : ",") + hello.kv_dtype;
  }
  return h;
}

proto::StatsReply Server::MakeStats() const {
  proto::StatsReply s;
  int64_t hit_tokens = 0, query_tokens = 0;
  double waste_weighted = 0;
  for (const auto& [id, group] : groups_) {
    SchedulerStats st = group->scheduler().Stats();
    s.num_waiting += static_cast<uint32_t>(st.num_waiting);
    s.num_running += static_cast<uint32_t>(st.num_running);
    s.blocks_used += static_cast<uint32_t>(st.blocks.num_used);
    s.blocks_free += static_cast<uint32_t>(st.blocks.num_free);
    s.blocks_cached += static_cast<uint32_t>(st.blocks.num_cached);
    s.blocks_total += static_cast<uint32_t>(st.blocks.num_blocks);
    s.num_preemptions += static_cast<uint64_t>(st.num_preemptions);
    s.num_draft_tokens += static_cast<uint64_t>(st.num_draft_tokens);
    s.num_accepted_tokens += static_cast<uint64_t>(st.num_accepted_tokens);
    s.num_verify_steps += static_cast<uint64_t>(st.num_verify_steps);
    hit_tokens += st.blocks.prefix_hit_tokens;
    query_tokens += st.blocks.prefix_query_tokens;
    waste_weighted += st.blocks.kv_waste * st.blocks.num_used;
  }
  s.prefix_hit_rate = query_tokens == 0 ? 0.0 : double(hit_tokens) / double(query_tokens);
  s.kv_waste = s.blocks_used == 0 ? 0.0 : waste_weighted / s.blocks_used;
  const Clock::time_point now = Clock::now();
  int64_t window_tokens = 0;
  Clock::time_point oldest = now;
  for (const auto& [t, n] : recent_tokens_) {
    if (now - t <= kThroughputWindow) {
      window_tokens += n;
      oldest = std::min(oldest, t);
    }
  }
  const double seconds = std::chrono::duration<double>(now - oldest).count();
  s.tokens_per_second = seconds > 0 ? window_tokens / seconds : 0.0;
  s.num_requests_total = num_requests_total_;
  s.num_requests_finished = num_requests_finished_;
  s.num_requests_rejected = num_requests_rejected_;
  s.num_messages_dropped = num_messages_dropped_;
  s.num_worker_groups = static_cast<uint32_t>(groups_.size());
  s.num_steps_total = num_steps_total_;
  s.num_replays = num_replays_total_;
  s.num_requests_waiting_for_group = static_cast<uint32_t>(orphans_.size());
  s.num_generated_tokens = num_generated_tokens_;
  return s;
}

// ---------------------------------------------------------------------------------------------
// Worker groups

Status Server::SendToWorker(const std::string& routing_id, const WorkerMessage& message) {
  return worker_socket_->Send({routing_id, EncodeWorkerMessage(message)}, kSendTimeout);
}

WorkerGroupLink* Server::FindGroupByRoutingId(const std::string& routing_id) {
  for (auto& [id, group] : groups_) {
    if (group->routing_id() == routing_id) return group.get();
  }
  return nullptr;
}

WorkerGroupLink* Server::LeastLoadedGroup() {
  WorkerGroupLink* best = nullptr;
  for (auto& [id, group] : groups_) {
    if (best == nullptr || group->load() < best->load()) best = group.get();
  }
  return best;
}

void Server::HandleWorkerFrames(std::vector<std::string> frames) {
  if (frames.size() < 2) {
    ++num_messages_dropped_;
    return;
  }
  const std::string& routing_id = frames[0];
  const std::string& payload = frames.back();  // tolerate an empty delimiter frame
  StatusOr<WorkerMessage> decoded = DecodeWorkerMessage(payload);
  if (!decoded.ok()) {
    ++num_messages_dropped_;
    LOG(WARN) << "coordinator: dropped a worker message: " << decoded.status().ToString();
    return;
  }
  WorkerGroupLink* group = FindGroupByRoutingId(routing_id);
  if (group != nullptr) group->MarkSeen(Clock::now());
  std::visit(
      [&](auto&& m) {
        using T = std::decay_t<decltype(m)>;
        if constexpr (std::is_same_v<T, HelloMessage>) {
          HandleHello(routing_id, m);
        } else if constexpr (std::is_same_v<T, StepResult>) {
          if (group == nullptr || !group->has_step_in_flight()) {
            ++num_messages_dropped_;
            return;
          }
          HandleStepResult(*group, m);
        } else if constexpr (std::is_same_v<T, HeartbeatMessage>) {
          // A beat from a leader's liveness connection (routing id: the session's + "/beat").
          auto beating = groups_.find(m.group_id);
          if (m.group_id != 0 && beating != groups_.end() && routing_id == beating->second->routing_id() + "/beat") {
            beating->second->MarkSeen(Clock::now());
          }
          if (!m.is_echo) {
            HeartbeatMessage echo = m;
            echo.is_echo = true;
            (void)SendToWorker(routing_id, echo);
          }
        } else if constexpr (std::is_same_v<T, ErrorMessage>) {
          if (group == nullptr) return;
          LOG(WARN) << "coordinator: group " << group->group_id() << " reports " << m.ToStatus().ToString();
          if (!m.is_fatal && group->has_step_in_flight() && m.step_id == group->in_flight().step_id) {
            FailStep(*group, m.ToStatus());
          } else {
            LoseGroup(group->group_id(), "worker group error: " + m.message);
          }
        } else {
          ++num_messages_dropped_;  // Welcome/Shutdown/StepPlan are ours to send
        }
      },
      *decoded);
}

void Server::HandleHello(const std::string& routing_id, const HelloMessage& hello) {
  auto refuse = [&](const std::string& why) {
    LOG(WARN) << "coordinator: refused a worker group: " << why;
    ErrorMessage error;
    error.code = StatusCode::kFailedPrecondition;
    error.message = why;
    error.is_fatal = true;
    (void)SendToWorker(routing_id, error);
    (void)SendToWorker(routing_id, ShutdownMessage{why});
  };
  if (Status version = CheckProtocolVersion(hello); !version.ok()) return refuse(version.message());
  if (options_.model_fingerprint && !(hello.model == *options_.model_fingerprint)) {
    return refuse("the group serves model " + hello.model.ToHex() + ", the coordinator " +
                  options_.model_fingerprint->ToHex());
  }
  if (hello.num_blocks <= 0 || hello.block_size <= 0) return refuse("the group has no KV blocks");
  if (hello.vocab_size > 0 && hello.vocab_size != options_.limits.vocab_size) {
    return refuse("vocab size " + std::to_string(hello.vocab_size) + " != " + std::to_string(options_.limits.vocab_size));
  }
  if (WorkerGroupLink* old = FindGroupByRoutingId(routing_id)) {
    LoseGroup(old->group_id(), "the group registered again", /*is_reregistering=*/true);
  }
  const uint32_t group_id = next_group_id_++;
  auto group = std::make_unique<WorkerGroupLink>(group_id, routing_id, hello, options_.scheduler);
  WelcomeMessage welcome;
  welcome.group_id = group_id;
  welcome.heartbeat_interval_ms = static_cast<uint32_t>(options_.heartbeat_interval.count());
  if (Status sent = SendToWorker(routing_id, welcome); !sent.ok()) {
    LOG(WARN) << "coordinator: could not welcome a worker group: " << sent.ToString();
    return;
  }
  LOG(INFO) << "coordinator: worker group " << group_id << " registered: tp " << hello.tp_size << ", "
            << hello.num_blocks << " KV pages of " << hello.block_size << " tokens in " << hello.kv_groups.num_groups()
            << " layer group(s), " << hello.kv_groups.num_sliding() << " sliding, host " << hello.hostname;
  groups_.emplace(group_id, std::move(group));
  AdoptOrphans();
}

void Server::StartSteps() {
  const Clock::time_point now = Clock::now();
  std::vector<std::pair<uint32_t, std::string>> failed;
  for (auto& [id, group] : groups_) {
    if (!group->has_step_in_flight() && group->scheduler().has_unfinished()) {
      StepPlan plan = group->scheduler().Schedule();  // the engine step, part 1
      if (!plan.sequences.empty()) {
        if (Status sent = SendToWorker(group->routing_id(), plan); !sent.ok()) {
          group->scheduler().DiscardInFlight();
          failed.emplace_back(id, "could not send a step: " + sent.ToString());
          continue;
        }
        metrics_.OnScheduled(plan, now);
        group->SetInFlight(std::move(plan), now);
      } else {
        group->scheduler().DiscardInFlight();
      }
    }
    // Heartbeats go out during steps too: a send to a leader whose connection is gone fails at
    // once, so a crashed group is noticed without waiting for the step deadline.
    if (now - group->last_heartbeat_sent() >= options_.heartbeat_interval) {
      HeartbeatMessage heartbeat;
      heartbeat.sequence = group->NextHeartbeatSequence();
      if (Status sent = SendToWorker(group->routing_id(), heartbeat); !sent.ok()) {
        failed.emplace_back(id, "could not send a heartbeat: " + sent.ToString());
        continue;
      }
      group->MarkHeartbeatSent(now);
    }
  }
  for (const auto& [id, why] : failed) LoseGroup(id, why);
}

void Server::HandleStepResult(WorkerGroupLink& group, const StepResult& result) {
  // The engine step, part 2: events = scheduler.Postprocess(plan, result); Stream(events).
  if (result.step_id != group.in_flight().step_id) {
    ++num_messages_dropped_;  // a late answer to a step we gave up on
    return;
  }
  StepPlan plan = group.TakeInFlight();
  StatusOr<std::vector<SequenceEvent>> events = group.scheduler().Postprocess(plan, result);
  if (!events.ok()) {
    group.scheduler().DiscardInFlight();
    LoseGroup(group.group_id(), "the group answered a step with a mismatched result: " + events.status().message());
    return;
  }
  ++num_steps_total_;
  metrics_.OnStepResult(group.group_id(), plan, result);
  Stream(group, *events);
}

void Server::FailStep(WorkerGroupLink& group, const Status& error) {
  // The group refused this plan but serves on: retrying the same sequences would fail the same
  // way, so their requests end with an internal error.
  StepPlan plan = group.TakeInFlight();
  group.scheduler().DiscardInFlight();
  std::vector<uint64_t> request_ids;
  for (const SequencePlan& seq : plan.sequences) request_ids.push_back(seq.seq_id / kMaxSamplesPerRequest);
  std::sort(request_ids.begin(), request_ids.end());
  request_ids.erase(std::unique(request_ids.begin(), request_ids.end()), request_ids.end());
  for (uint64_t request_id : request_ids) {
    FailRequest(request_id, proto::ErrorKind::kInternal,
                "the worker group failed this request's step: " + error.message());
  }
}

void Server::Stream(WorkerGroupLink& group, const std::vector<SequenceEvent>& events) {
  const Clock::time_point now = Clock::now();
  int64_t num_tokens = 0;
  for (const SequenceEvent& event : events) {
    auto it = requests_.find(event.request_id);
    if (it == requests_.end()) continue;
    LiveRequest& live = it->second;
    // Tokens past a stop string (kept by one speculative step) are never the client's.
    if (event.token_id >= 0 && !live.stream->is_sample_finished(event.sample_index)) {
      ++num_tokens;
      metrics_.OnToken(event.request_id, event.sample_index, now);
    }
    if (event.is_finished && event.finish_reason == FinishReason::kError) {
      FailRequest(event.request_id, proto::ErrorKind::kInternal,  // the other samples too
                  "the worker group returned no token for this request");
      continue;
    }
    RequestStream::Output out = live.stream->OnEvent(event);
    if (out.is_stop_string_hit && !event.is_finished) {
      // A later token of the same step may have ended the sequence already (speculation): no-op then.
      (void)group.scheduler().Abort(event.seq_id, FinishReason::kStop);
      for (auto& m : live.stream->FinishSample(event.sample_index, proto::FinishReason::kStop, event.usage)) {
        out.messages.push_back(std::move(m));
      }
    }
    const std::string client_id = live.client_id;
    const bool is_done = live.stream->all_finished();
    if (is_done) {
      ++num_requests_finished_;
      metrics_.OnFinished(event.request_id, out.is_stop_string_hit ? FinishReason::kStop : event.finish_reason, now);
      request_by_client_.erase({client_id, live.stream->client_request_id()});
      requests_.erase(it);
    }
    for (const auto& m : out.messages) SendToClient(client_id, m);
  }
  num_generated_tokens_ += static_cast<uint64_t>(num_tokens);
  recent_tokens_.emplace_back(now, num_tokens);
  while (!recent_tokens_.empty() && now - recent_tokens_.front().first > kThroughputWindow) {
    recent_tokens_.erase(recent_tokens_.begin());
  }
}

void Server::FailRequest(uint64_t request_id, proto::ErrorKind kind, const std::string& message) {
  auto it = requests_.find(request_id);
  if (it == requests_.end()) return;
  const std::string client_id = it->second.client_id;
  const uint64_t client_request_id = it->second.stream->client_request_id();
  ForgetRequest(request_id);
  ++num_requests_rejected_;
  metrics_.OnFailed(request_id, kind);
  SendToClient(client_id, proto::MakeErrorMessage(client_request_id, kind, message));
}

void Server::ShutdownGroups(const std::string& reason) {
  for (auto& [id, group] : groups_) (void)SendToWorker(group->routing_id(), ShutdownMessage{reason});
  for (auto& [request_id, live] : requests_) {
    (void)client_socket_->Send(
        {live.client_id, proto::EncodeServerMessage(proto::MakeErrorMessage(
                             live.stream->client_request_id(), proto::ErrorKind::kOverloaded, "the server stopped"))},
        kSendTimeout);
  }
  requests_.clear();
  request_by_client_.clear();
  groups_.clear();
}

}  // namespace tpserve
