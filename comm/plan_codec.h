// Bytes <-> StepPlan / StepResult (comm/step_plan.h) with Cap'n Proto (comm/schema/worker.capnp).
// Used inside a worker group (the leader broadcasts plan bytes to the other ranks) and, wrapped in
// a WorkerMessage (comm/worker_message.h), between the coordinator and the leader.
//
// Decoding never trusts its input: it reads with explicit limits (DecodeLimits), checks every
// field that could make a receiver misbehave (negative ids, NaN parameters, absurd counts), and
// reports DATA_LOSS (unreadable bytes) or INVALID_ARGUMENT (readable but invalid) — never a crash.
// It does not know the model, so range checks against the vocabulary or KV pool are the
// executor's job.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "comm/step_plan.h"
#include "common/status.h"

namespace tpserve {

struct DecodeLimits {
  uint64_t max_bytes = uint64_t{512} << 20;  // refuse larger inputs outright
  int nesting_limit = 16;                    // our schema nests at most 5 deep
  // Words the reader may traverse, as a multiple of the message size (guards against messages
  // whose pointers revisit the same data to amplify work).
  uint64_t traversal_factor = 4;
};

// Largest counts a plan may carry (each far above anything a real step needs).
inline constexpr int32_t kMaxSequencesPerStep = 1 << 16;
inline constexpr int32_t kMaxTopLogprobs = 1024;
inline constexpr int32_t kMaxProposalsPerSequence = 64;

std::string EncodeStepPlan(const StepPlan& plan);
StatusOr<StepPlan> DecodeStepPlan(std::string_view bytes, const DecodeLimits& limits = {});

std::string EncodeStepResult(const StepResult& result);
StatusOr<StepResult> DecodeStepResult(std::string_view bytes, const DecodeLimits& limits = {});

// The structural checks DecodeStepPlan / DecodeStepResult apply (exposed for the local driver,
// which builds plans in memory). INVALID_ARGUMENT naming the first offending field.
Status ValidateStepPlan(const StepPlan& plan);
Status ValidateStepResult(const StepResult& result);

}  // namespace tpserve
