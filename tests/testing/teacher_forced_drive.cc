#include "tests/testing/teacher_forced_drive.h"

#include "common/check.h"

namespace tpserve::testing {

StatusOr<DriveOutputs> Drive(const StepFunction& execute, const TeacherForcedDrive& drive) {
  CHECK(drive.prefill_len >= 1 && drive.prefill_len <= drive.prompt.size());
  const std::vector<int32_t>& prompt = drive.prompt;
  DriveOutputs out;
  for (size_t t = drive.prefill_len; t <= prompt.size(); ++t) {
    const bool prefill = t == drive.prefill_len;
    SequencePlan seq;
    seq.seq_id = 7;
    seq.num_cached = prefill ? 0 : static_cast<int32_t>(t - 1);
    seq.token_ids = prefill ? std::vector<int32_t>(prompt.begin(), prompt.begin() + t)
                            : std::vector<int32_t>{prompt[t - 1]};
    seq.block_table = drive.block_table;
    seq.needs_token = true;
    StepPlan plan;
    plan.step_id = t;
    plan.return_logits = true;
    plan.sequences.push_back(seq);
    ASSIGN_OR_RETURN(StepResult result, execute(plan));
    if (result.sequences.size() != 1) return Internal("expected one sequence result");
    out.logits.push_back(result.sequences[0].logits);
  }
  GenerateCapacity capacity;
  capacity.block_size = drive.block_size;
  capacity.num_blocks = drive.num_blocks;
  GenerateOptions generate;
  generate.max_tokens = drive.greedy_tokens;
  generate.ignore_eos = true;
  generate.seq_id = 2;
  const std::vector<int32_t> greedy_prompt(prompt.begin(), prompt.begin() + drive.greedy_prompt_len);
  ASSIGN_OR_RETURN(GenerateOutput output, LocalGenerate(execute, capacity, greedy_prompt, generate));
  out.greedy = output.token_ids;
  return out;
}

ExecutorOptions SmallExecutorOptions(int tp_rank, int tp_size, int block_size, int64_t num_blocks) {
  ExecutorOptions options;
  options.tp_rank = tp_rank;
  options.tp_size = tp_size;
  options.block_size = block_size;
  options.num_kv_blocks = num_blocks;
  options.num_threads = 1;
  return options;
}

}  // namespace tpserve::testing
