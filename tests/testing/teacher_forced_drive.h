// The drive the multi-rank engine tests share: one sequence prefilled with the first `prefill_len`
// prompt tokens, then fed the rest one decode step at a time with full logits returned (teacher
// forcing), then a greedy generation of a second sequence from the first `greedy_prompt_len` tokens.
// The same drive through a group leader and through a single-rank executor gives the two sides a test
// compares.
#pragma once

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "common/status.h"
#include "worker/group_runtime.h"
#include "worker/local_generate.h"
#include "worker/model_executor.h"

namespace tpserve::testing {

struct TeacherForcedDrive {
  std::vector<int32_t> prompt;
  size_t prefill_len = 0;             // REQUIRES: 1 <= prefill_len <= prompt.size()
  std::vector<int32_t> block_table;   // of the teacher-forced sequence
  int block_size = 4;
  int64_t num_blocks = 0;             // of the KV pool, for the greedy run
  int greedy_tokens = 0;
  size_t greedy_prompt_len = 0;
};

struct DriveOutputs {
  std::vector<std::vector<float>> logits;  // per teacher-forced step [V]
  std::vector<int32_t> greedy;             // [greedy_tokens]
};

StatusOr<DriveOutputs> Drive(const StepFunction& execute, const TeacherForcedDrive& drive);

// Options of a small single-thread executor: rank `tp_rank` of `tp_size`, a fixed pool.
ExecutorOptions SmallExecutorOptions(int tp_rank, int tp_size, int block_size, int64_t num_blocks);

// A rank's shard for RunGroup from an executor with Execute(plan) and num_kv_blocks().
template <typename Executor>
LoadedShard ShareExecutor(std::unique_ptr<Executor> executor) {
  const int64_t num_blocks = executor->num_kv_blocks();
  std::shared_ptr<Executor> shared = std::move(executor);
  return LoadedShard{std::make_unique<FunctionStepExecutor>([shared](const StepPlan& plan) {
                       return shared->Execute(plan);
                     }),
                     num_blocks};
}

}  // namespace tpserve::testing
