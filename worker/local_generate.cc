#include "worker/local_generate.h"

#include <algorithm>
#include <chrono>

#include "worker/model_executor.h"

namespace tpserve {
namespace {

double MsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

StatusOr<GenerateOutput> LocalGenerate(const StepFunction& execute, const GenerateCapacity& capacity,
                                       const std::vector<int32_t>& prompt, const GenerateOptions& options) {
  if (prompt.empty()) return InvalidArgument("empty prompt");
  const int64_t cache_positions = capacity.num_blocks * int64_t{capacity.block_size};
  const int64_t max_positions =
      capacity.max_positions > 0 ? std::min<int64_t>(capacity.max_positions, cache_positions) : cache_positions;
  if (static_cast<int64_t>(prompt.size()) > max_positions) {
    return OutOfRange("prompt of " + std::to_string(prompt.size()) + " tokens does not fit " +
                      std::to_string(max_positions) + " positions");
  }
  GenerateOutput output;
  SequencePlan seq;
  seq.seq_id = options.seq_id;
  seq.num_cached = 0;
  seq.token_ids = prompt;
  seq.needs_token = true;
  seq.sampling = options.sampling;
  std::vector<int32_t> history = prompt;  // prompt + generated, for penalties

  uint64_t step_id = 0;
  while (static_cast<int>(output.token_ids.size()) < options.max_tokens) {
    const int64_t num_positions = seq.num_cached + static_cast<int64_t>(seq.token_ids.size());
    if (num_positions > max_positions) {
      output.finish_reason = "length";
      return output;
    }
    const int64_t num_blocks = (num_positions + capacity.block_size - 1) / capacity.block_size;
    while (static_cast<int64_t>(seq.block_table.size()) < num_blocks) {
      seq.block_table.push_back(static_cast<int32_t>(seq.block_table.size()));
    }
    seq.sample_index = static_cast<uint32_t>(output.token_ids.size());
    if (seq.sampling.has_penalties()) seq.penalty_tokens = history;

    StepPlan plan;
    plan.step_id = step_id++;
    plan.sequences.push_back(seq);
    const auto start = std::chrono::steady_clock::now();
    ASSIGN_OR_RETURN(StepResult result, execute(plan));
    if (output.token_ids.empty()) {
      output.prefill_ms += MsSince(start);
    } else {
      output.decode_ms += MsSince(start);
      ++output.num_decode_steps;
    }
    if (result.sequences.size() != 1) {
      return Internal("step returned " + std::to_string(result.sequences.size()) + " results for one sequence");
    }
    const int32_t token = result.sequences[0].token_id;
    output.token_ids.push_back(token);
    history.push_back(token);
    if (options.on_token) options.on_token(token);
    if (!options.ignore_eos &&
        std::find(options.stop_ids.begin(), options.stop_ids.end(), token) != options.stop_ids.end()) {
      output.finish_reason = "stop";
      return output;
    }
    seq.num_cached = static_cast<int32_t>(num_positions);
    seq.token_ids = {token};
  }
  output.finish_reason = "length";
  return output;
}

StatusOr<GenerateOutput> LocalGenerate(ModelExecutor& executor, const std::vector<int32_t>& prompt,
                                       const GenerateOptions& options) {
  GenerateCapacity capacity;
  capacity.block_size = executor.block_size();
  capacity.num_blocks = executor.num_kv_blocks();
  capacity.max_positions = executor.config().context_length;
  return LocalGenerate([&executor](const StepPlan& plan) { return executor.Execute(plan); }, capacity, prompt,
                       options);
}

}  // namespace tpserve
