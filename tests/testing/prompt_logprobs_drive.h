// The two drives the prompt-logprob tests compare, on any StepFunction (one executor, a thread
// group's rank, an MPI group's leader):
//  - ScoreByPrefill: the prompt prefilled in chunks with SequencePlan::prompt_logprobs, batched with
//    a sequence that prefills then decodes and, in the first step, a second scored prompt;
//  - ForceByDecode: teacher forcing, one decode step per prompt token, each step forced (a +1e30
//    logit bias) to sample the next prompt token, whose logprob the sampler reports.
// The engine promises they agree bitwise (worker/token_scorer.h).
#pragma once

#include <cstdint>
#include <vector>

#include "comm/step_plan.h"
#include "common/status.h"
#include "worker/local_generate.h"

namespace tpserve::testing {

inline constexpr int32_t kPromptDriveLogprobs = 3;  // top-n both drives ask for

// REQUIRES: block size >= 4 and a pool of >= 64 blocks (the drives use blocks 0..59);
// prompt.size() <= 40, vocab_size >= 32.
StatusOr<std::vector<PromptTokenLogprob>> ScoreByPrefill(const StepFunction& execute,
                                                         const std::vector<int32_t>& prompt, int chunk,
                                                         int vocab_size);
StatusOr<std::vector<SequenceResult>> ForceByDecode(const StepFunction& execute, const std::vector<int32_t>& prompt);

// GoogleTest expectations: scored[i] is prompt[i + 1] with exactly forced[i]'s logprob and top-n bits.
void ExpectBitwiseEqual(const std::vector<PromptTokenLogprob>& scored, const std::vector<SequenceResult>& forced,
                        const std::vector<int32_t>& prompt);

}  // namespace tpserve::testing
