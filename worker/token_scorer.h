// ScoreTokens: the logprob of a given token at each of a batch of rows, from vocabulary-parallel
// logits, without gathering them: what prompt logprobs (SequencePlan::prompt_logprobs) need, and
// the "forced token" twin of the sampler. It runs the sampler's own first two all-gather rounds
// (worker/sampling_rounds.h: raw max, top-n, log-sum-exp) over rows with no processing, so a
// token's logprob here is bitwise the one SampleTokens reports when it samples that token from the
// same logits, on any TP degree; one more small all-gather brings each target's raw logit from the
// rank that holds it.
#pragma once

#include <cstdint>
#include <vector>

#include "comm/communicator.h"
#include "comm/step_plan.h"
#include "common/status.h"

namespace tpserve {

// logits: [R, V_shard] (row-major, R = num_rows), this rank's vocabulary slice
// [vocab_begin, vocab_begin + vocab_shard) of vocab_size; targets[r] is the token row r scores and
// num_logprobs[r] how many top alternatives it reports. Returns one PromptTokenLogprob per row
// (token_id = targets[r]), identical on every rank of comm.
// REQUIRES: targets and num_logprobs have num_rows entries, targets in [0, vocab_size),
//           num_logprobs >= 0; the slices tile [0, vocab_size) as for SampleTokens; every rank
//           passes the same targets and num_logprobs.
// Errors: INTERNAL for a NaN or +inf logit (the same on every rank); any error of comm's.
StatusOr<std::vector<PromptTokenLogprob>> ScoreTokens(const float* logits, int64_t num_rows, int64_t vocab_begin,
                                                      int64_t vocab_shard, int64_t vocab_size,
                                                      const std::vector<int32_t>& targets,
                                                      const std::vector<int32_t>& num_logprobs, Communicator& comm);

}  // namespace tpserve
