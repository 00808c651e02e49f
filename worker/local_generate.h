// LocalGenerate: a small generation loop for one sequence — prefill the prompt, then decode one token
// per step — that drives any step executor. It allocates KV blocks linearly (0, 1, 2, ...), so it is for
// debugging and scripting (tpserve-run), not serving. The executor is a function so the same loop runs
// on one rank (ModelExecutor::Execute) or through a tensor-parallel group leader.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "comm/step_plan.h"
#include "common/status.h"

namespace tpserve {

class ModelExecutor;

using StepFunction = std::function<StatusOr<StepResult>(const StepPlan&)>;

struct GenerateOptions {
  int max_tokens = 32;
  SamplingParams sampling;
  bool ignore_eos = false;
  std::vector<int32_t> stop_ids;  // end-of-sequence ids (eos, end of turn); ignored with ignore_eos
  uint64_t seq_id = 1;
  // Called with each generated token as it arrives (optional).
  std::function<void(int32_t)> on_token;
};

struct GenerateOutput {
  std::vector<int32_t> token_ids;  // generated tokens, not the prompt (a final stop id included)
  std::string finish_reason;       // "stop" or "length"
  double prefill_ms = 0;
  double decode_ms = 0;
  int num_decode_steps = 0;
};

// The capacity the loop may use: KV blocks [0, num_blocks) of block_size tokens, positions < max_positions.
struct GenerateCapacity {
  int block_size = 16;
  int64_t num_blocks = 0;
  int64_t max_positions = 0;  // the model's context length
};

// Errors: INVALID_ARGUMENT (empty prompt), OUT_OF_RANGE (the prompt does not fit the context or the KV
// blocks), and the executor's errors. Generation stops early (finish "length") when the cache is full.
StatusOr<GenerateOutput> LocalGenerate(const StepFunction& execute, const GenerateCapacity& capacity,
                                       const std::vector<int32_t>& prompt, const GenerateOptions& options);
// On one ModelExecutor.
StatusOr<GenerateOutput> LocalGenerate(ModelExecutor& executor, const std::vector<int32_t>& prompt,
                                       const GenerateOptions& options);

}  // namespace tpserve
