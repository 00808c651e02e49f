// SampleStep: the tokens (and, for tests, the full logits) of one step's sampled rows, and the
// prompt logprobs of its scored rows, from this rank's vocabulary shard of the logits, on host memory. Shared by every executor, so the CPU and
// the CUDA engines pick tokens by the same rules (worker/sampler.h).
#pragma once

#include <cstdint>
#include <vector>

#include "comm/communicator.h"
#include "common/status.h"
#include "worker/shard_plan.h"
#include "worker/step_batch.h"

namespace tpserve {

// logits: [S_sampled + R, V_shard] on the host, the rows of batch.logit_rows; `comm` is a
// host-buffer communicator over the TP group. Sets result->sequences (one SequenceResult per
// sampled row, in plan order; with return_logits each carries the row's full logits [V],
// all-gathered across the group) and result->prompt_logprobs (one per batch.scored_seqs, worker/
// token_scorer.h). Errors: the sampler's (INVALID_ARGUMENT, INTERNAL for a NaN logit) and comm's.
Status SampleStep(const float* logits, const StepBatch& batch, const ShardPlan& shard, int64_t vocab_size,
                  bool return_logits, Communicator& comm, StepResult* result);

}  // namespace tpserve
