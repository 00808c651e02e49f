#include "bench/loadgen/tpserve_backend.h"

namespace tpserve::loadgen {

StatusOr<std::unique_ptr<TpserveBackend>> TpserveBackend::Connect(const std::string& server, const std::string& keys_dir,
                                                                  const std::string& key_name) {
  ClientOptions options;
  options.server = server;
  options.keys_dir = keys_dir;
  options.key_name = key_name;
  options.timeout = std::chrono::milliseconds(10000);
  ASSIGN_OR_RETURN(std::unique_ptr<Client> client, Client::Connect(options));
  return std::unique_ptr<TpserveBackend>(new TpserveBackend(std::move(client)));
}

StatusOr<ServerInfo> TpserveBackend::Info() {
  ASSIGN_OR_RETURN(proto::HealthReply health, client_->Health());
  if (!health.ok || health.num_worker_groups == 0) return Unavailable("the coordinator has no worker group");
  ServerInfo info;
  info.model_name = health.model_name;
  info.vocab_size = static_cast<int32_t>(health.vocab_size);
  info.context_length = static_cast<int32_t>(health.context_length);
  return info;
}

StatusOr<uint64_t> TpserveBackend::Start(const BenchRequest& request) {
  proto::GenerateRequest g;
  g.prompt_kind = proto::PromptKind::kTokenIds;
  g.prompt_ids = request.prompt_ids;
  g.max_tokens = static_cast<uint32_t>(request.output_len);
  g.ignore_eos = true;
  g.stream = true;
  return client_->Start(g);
}

void TpserveBackend::Cancel(uint64_t request_id) { (void)client_->Cancel(request_id); }

StatusOr<BackendEvent> TpserveBackend::Receive(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {  // skips messages that carry no event (empty chunks, other kinds)
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    ASSIGN_OR_RETURN(proto::ServerMessage message, client_->Receive(std::max(left, std::chrono::milliseconds(1))));
    BackendEvent e;
    e.request_id = message.request_id;
    switch (message.kind) {
      case proto::ServerMessageKind::kChunk:
        if (message.chunk.token_ids.empty()) break;
        e.kind = BackendEvent::Kind::kTokens;
        e.num_tokens = static_cast<int32_t>(message.chunk.token_ids.size());
        return e;
      case proto::ServerMessageKind::kFinish:
        if (message.finish.reason == proto::FinishReason::kCancelled) {
          e.kind = BackendEvent::Kind::kError;
          e.error = "cancelled";
          return e;
        }
        e.kind = BackendEvent::Kind::kFinish;
        e.reported_output_tokens = static_cast<int32_t>(message.finish.usage.completion_tokens);
        e.cached_prompt_tokens = static_cast<int32_t>(message.finish.usage.cached_prompt_tokens);
        return e;
      case proto::ServerMessageKind::kError:
        e.kind = BackendEvent::Kind::kError;
        e.error = StatusFromError(message.error).ToString();
        return e;
      default:
        break;
    }
    if (std::chrono::steady_clock::now() >= deadline) return DeadlineExceeded("no event");
  }
}

StatusOr<KvSample> TpserveBackend::SampleKv() {
  ASSIGN_OR_RETURN(proto::StatsReply stats, client_->Stats());
  KvSample s;
  s.blocks_used = stats.blocks_used;
  s.blocks_total = stats.blocks_total;
  s.waste = stats.kv_waste;
  return s;
}

}  // namespace tpserve::loadgen
