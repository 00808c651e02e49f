// The client protocol (comm/schema/client.capnp) as plain C++ values, and their Cap'n Proto
// encoding. Both sides (coordinator, client library) speak only these structs; nothing outside
// comm/client_codec.cc touches generated Cap'n Proto code.
//
// Decoding is defensive: the bytes come from the network. A message that is not a multiple of 8
// bytes, larger than kMaxClientMessageBytes, deeper than the nesting limit, that makes the reader
// traverse more than its size allows, or whose lists exceed the limits below, is an
// INVALID_ARGUMENT Status, never an exception or an abort. Semantic checks that need the model
// (token ids < V, prompt length vs context) live in coordinator/request_validation.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "comm/beam_config.h"
#include "comm/step_plan.h"
#include "common/status.h"

// The protocol's types live in their own namespace: names such as ChatMessage and FinishReason
// also exist, with other meanings, in model/ and coordinator/.
namespace tpserve::proto {

inline constexpr uint32_t kClientProtocolVersion = 3;  // == client.capnp kClientProtocolVersion

// Limits of one decoded message (each a generous bound a real request never reaches).
inline constexpr size_t kMaxClientMessageBytes = 8u << 20;  // also the ZMQ_MAXMSGSIZE of the socket
inline constexpr size_t kMaxPromptTokens = 1u << 20;
inline constexpr size_t kMaxTextBytes = 4u << 20;
inline constexpr size_t kMaxChatMessages = 1024;
inline constexpr size_t kMaxStopStrings = 16;
inline constexpr size_t kMaxStopStringBytes = 256;
inline constexpr size_t kMaxStopTokenIds = 256;
inline constexpr size_t kMaxLogitBias = 1024;
inline constexpr size_t kMaxUserBytes = 256;
inline constexpr int kCapnpNestingLimit = 16;

enum class ErrorKind {
  kInternal = 0,
  kInvalidRequest,
  kPromptTooLong,
  kOverloaded,
  kCancelled,
  kWorkerLost,
  kUnauthenticated,
  kUnavailable,  // no worker group serves: starting, draining or lost
};
const char* ErrorKindName(ErrorKind kind);  // "invalid_request", ...
// The typed error a Status becomes on the wire (INVALID_ARGUMENT → kInvalidRequest, ...).
ErrorKind ErrorKindFromStatus(const Status& status);

enum class FinishReason { kStop = 0, kLength, kCancelled };
const char* FinishReasonName(FinishReason reason);  // "stop" | "length" | "cancelled"

struct ChatMessage {
  std::string role;  // "system" | "user" | "assistant"
  std::string content;
};

enum class PromptKind { kText = 0, kTokenIds, kChat };

enum class SpeculativeChoice { kServerDefault = 0, kOff, kNgram, kDraft };

struct SpeculativeRequest {
  SpeculativeChoice method = SpeculativeChoice::kServerDefault;
  uint32_t num_tokens = 0;  // k; 0: the method's default
};
inline constexpr uint32_t kMaxSpeculativeTokens = 16;
// "off", "ngram", "ngram:K", "draft" or "draft:K" (K in [1, kMaxSpeculativeTokens]); INVALID_ARGUMENT naming
// the forms otherwise.
StatusOr<SpeculativeRequest> ParseSpeculativeRequest(std::string_view text);

struct GenerateRequest {
  PromptKind prompt_kind = PromptKind::kText;
  std::string prompt_text;              // kText
  std::vector<int32_t> prompt_ids;      // kTokenIds
  std::vector<ChatMessage> chat;        // kChat
  SamplingParams sampling;              // num_logprobs carries the request's numLogprobs;
                                        // has_seed false: the coordinator draws a seed
  uint32_t max_tokens = 16;
  std::vector<std::string> stop;        // stop strings
  std::vector<int32_t> stop_token_ids;
  bool ignore_eos = false;
  bool stream = true;
  uint32_t n = 1;
  int32_t priority = 0;
  bool prompt_logprobs = false;         // answer a PromptLogprobs message before the first chunk
  std::string user;                     // end-user id, for logs
  SpeculativeRequest speculative;
  BeamConfig beam;                      // width 0: no beam search
};

// What /tokenize takes: a text (kText) or chat messages (kChat) of a GenerateRequest's prompt.
struct TokenizeRequest {
  PromptKind prompt_kind = PromptKind::kText;  // kText | kChat
  std::string prompt_text;
  std::vector<ChatMessage> chat;
  bool add_special_tokens = true;
};

struct DetokenizeRequest {
  std::vector<int32_t> token_ids;
};

enum class ClientMessageKind { kGenerate = 0, kCancel, kHealth, kStats, kHeartbeat, kMetrics, kTokenize, kDetokenize };

struct ClientMessage {
  uint32_t version = kClientProtocolVersion;
  uint64_t request_id = 0;
  std::string api_key;
  ClientMessageKind kind = ClientMessageKind::kHealth;
  GenerateRequest generate;      // kGenerate only
  TokenizeRequest tokenize;      // kTokenize only
  DetokenizeRequest detokenize;  // kDetokenize only
};

struct TokenLogprobs {
  float logprob = 0.0f;
  std::vector<TokenLogprob> top;  // [num_logprobs], most likely first
};

struct TokenChunk {
  uint32_t sample_index = 0;
  std::vector<int32_t> token_ids;
  std::string text;                     // final text delta
  std::vector<TokenLogprobs> logprobs;  // [token_ids.size()] when logprobs were asked, else empty
};

struct Usage {
  uint32_t prompt_tokens = 0;
  uint32_t completion_tokens = 0;
  uint32_t cached_prompt_tokens = 0;
};

struct Finish {
  uint32_t sample_index = 0;
  FinishReason reason = FinishReason::kStop;
  Usage usage;
  double ttft_ms = 0;
  double tpot_ms = 0;
  uint64_t seed = 0;  // the request's seed, given or drawn by the coordinator: replays the request
  uint32_t num_replays = 0;  // re-runs after a lost worker group (same tokens; see README)
  uint32_t num_draft_tokens = 0;     // speculative proposals verified
  uint32_t num_accepted_tokens = 0;  // of those, kept
  double beam_score = 0;             // beam search: the hypothesis's length-penalised score
  double cumulative_logprob = 0;     // beam search: the sum of its tokens' logprobs
};

struct ErrorReply {
  ErrorKind kind = ErrorKind::kInternal;
  std::string message;
};

struct HealthReply {
  bool ok = false;
  uint32_t num_worker_groups = 0;
  bool draining = false;
  std::string model_name;
  uint32_t vocab_size = 0;
  uint32_t context_length = 0;
  uint64_t kv_tokens = 0;  // every layer's capacity in tokens, summed over the worker groups
  std::string kv_dtype;    // the groups' KV element types, distinct, joined by ","
};

struct StatsReply {
  uint32_t num_waiting = 0;
  uint32_t num_running = 0;
  uint32_t blocks_used = 0;
  uint32_t blocks_free = 0;
  uint32_t blocks_cached = 0;
  uint32_t blocks_total = 0;
  double prefix_hit_rate = 0;
  double kv_waste = 0;
  double tokens_per_second = 0;
  uint64_t num_requests_total = 0;
  uint64_t num_requests_finished = 0;
  uint64_t num_requests_rejected = 0;
  uint64_t num_messages_dropped = 0;
  uint32_t num_worker_groups = 0;
  uint64_t num_steps_total = 0;
  uint64_t num_generated_tokens = 0;
  uint64_t num_preemptions = 0;
  uint64_t num_replays = 0;
  uint32_t num_requests_waiting_for_group = 0;
  uint64_t num_draft_tokens = 0;
  uint64_t num_accepted_tokens = 0;
  uint64_t num_verify_steps = 0;
};

struct PromptLogprobs {
  std::vector<int32_t> token_ids;       // [P] the whole prompt as the model saw it
  std::vector<TokenLogprobs> logprobs;  // [P - 1]: token_ids[i + 1] given token_ids[0..i]
};

struct MetricsReply {
  std::string text;  // Prometheus text exposition format 0.0.4
};

struct TokenizeReply {
  std::vector<int32_t> token_ids;
  uint32_t max_model_len = 0;
};

struct DetokenizeReply {
  std::string text;
};

enum class ServerMessageKind {
  kChunk = 0, kFinish, kError, kHealth, kStats, kPromptLogprobs, kMetrics, kTokenize, kDetokenize
};

struct ServerMessage {
  uint32_t version = kClientProtocolVersion;
  uint64_t request_id = 0;
  ServerMessageKind kind = ServerMessageKind::kError;
  TokenChunk chunk;
  Finish finish;
  ErrorReply error;
  HealthReply health;
  StatsReply stats;
  PromptLogprobs prompt_logprobs;
  MetricsReply metrics;
  TokenizeReply tokenize;
  DetokenizeReply detokenize;
};

// Encoded bytes (a multiple of 8) of one message.
std::string EncodeClientMessage(const ClientMessage& message);
std::string EncodeServerMessage(const ServerMessage& message);

// INVALID_ARGUMENT when the bytes are not a well-formed message within the limits above.
// The version is decoded, not checked: the coordinator answers a wrong version with a typed error.
StatusOr<ClientMessage> DecodeClientMessage(const void* data, size_t size);
StatusOr<ServerMessage> DecodeServerMessage(const void* data, size_t size);

// Convenience constructors for replies.
ServerMessage MakeErrorMessage(uint64_t request_id, ErrorKind kind, std::string message);

}  // namespace tpserve::proto
