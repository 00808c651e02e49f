// The messages between the coordinator and a worker-group leader (comm/schema/worker.capnp):
// one WorkerMessage per ZeroMQ frame, in both directions. See the schema for the conversation.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include "comm/plan_codec.h"
#include "comm/step_plan.h"
#include "common/kv_groups.h"
#include "common/status.h"

namespace tpserve {

// Must equal workerProtocolVersion in comm/schema/worker.capnp (checked at compile time).
inline constexpr uint32_t kWorkerProtocolVersion = 6;

// Identifies a model file: its size and the SHA-256 of its first min(size, 8 MiB) bytes.
// Computed by ComputeModelFingerprint (comm/model_fingerprint.h).
struct ModelFingerprint {
  uint64_t file_size = 0;
  std::string sha256;  // 32 raw bytes

  bool operator==(const ModelFingerprint&) const = default;
  std::string ToHex() const;  // "<size>:<sha256 hex>"
};

// Leader -> coordinator, first message after connecting.
struct HelloMessage {
  uint32_t protocol_version = kWorkerProtocolVersion;
  ModelFingerprint model;
  int32_t tp_size = 1;
  int32_t num_blocks = 0;     // KV pages per rank
  int32_t block_size = 0;     // tokens per block
  KvGroups kv_groups;         // the pages' layer groups
  std::string kv_dtype = "f32";  // the KV cache's element type (tpserve-worker --kv-dtype)
  std::optional<ModelFingerprint> draft_model;  // tpserve-worker --draft-model's file; none without
  int32_t max_model_len = 0;  // longest sequence the group accepts
  int32_t vocab_size = 0;
  std::string hostname;
  int32_t pid = 0;
};

// Coordinator -> leader: the Hello was accepted.
struct WelcomeMessage {
  uint32_t group_id = 0;
  uint32_t heartbeat_interval_ms = 0;  // 0: no heartbeats expected
};

// Either way; the receiver answers with the same sequence and is_echo set.
struct HeartbeatMessage {
  uint64_t sequence = 0;
  int64_t sent_unix_micros = 0;
  bool is_echo = false;
  uint32_t group_id = 0;  // != 0: sent by that group's liveness socket (worker/group_session_beat.h)
};

// Coordinator -> leader: every rank of the group exits 0.
struct ShutdownMessage {
  std::string reason;
};

// Either way: a failed step (step_id) or a refused Hello. is_fatal: the sender is going away.
struct ErrorMessage {
  StatusCode code = StatusCode::kInternal;
  std::string message;
  uint64_t step_id = 0;
  bool is_fatal = false;

  Status ToStatus() const { return Status(code, message); }
};

using WorkerMessage = std::variant<HelloMessage, WelcomeMessage, StepPlan, StepResult, HeartbeatMessage,
                                   ShutdownMessage, ErrorMessage>;

std::string EncodeWorkerMessage(const WorkerMessage& message);
// DATA_LOSS for unreadable bytes, INVALID_ARGUMENT for readable but invalid contents (including
// an unknown union member from a newer peer and an out-of-range status code).
StatusOr<WorkerMessage> DecodeWorkerMessage(std::string_view bytes, const DecodeLimits& limits = {});

// OK when `hello` speaks our protocol version; FAILED_PRECONDITION naming both versions otherwise.
Status CheckProtocolVersion(const HelloMessage& hello);

// A short name for logs: "Hello", "StepPlan", ...
const char* WorkerMessageName(const WorkerMessage& message);

}  // namespace tpserve
