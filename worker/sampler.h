// Sampler: picks the next token of every row of a step from vocabulary-parallel logits, without
// gathering them. Each rank holds the logits of its slice [vocab_begin, vocab_begin + vocab_shard)
// of the vocabulary; a few small all-gathers (at most four per call, whatever the batch size,
// O(k * TP) numbers per row) give every rank the same exact result.
//
// Semantics, row by row (x_i: the row's logit of token i; counts c_i: occurrences of i in
// penalty_tokens), as vLLM orders them, each step in float32 in this order:
//   1. logit bias:          x_i += b for every (i, b) of logit_bias, in list order.
//   2. repetition penalty:  if c_i > 0: x_i = x_i > 0 ? x_i / rp : x_i * rp.
//   3. frequency, presence: x_i -= frequency_penalty * c_i; if c_i > 0: x_i -= presence_penalty.
//   4. temperature:         x_i /= temperature (sampling rows only); +inf from an overflow
//                           becomes FLT_MAX. Tokens at -inf are never chosen (a bias of -inf bans one).
// Greedy rows (temperature <= 0) return the argmax of x after steps 1-3, ties to the lowest id; the
// filters and the seed are ignored. Sampling rows then keep a set of allowed tokens:
//   5. top-k (k > 0): the k largest x, ties to the lower id (exactly k tokens, or all if fewer).
//   6. min-p (> 0):   x_i - m >= log(min_p), m = the largest x (in double).
//   7. top-p (< 1):   sort the tokens left by (x desc, id asc); each has the weight
//                     q_i = floor(exp(x_i - m) * 2^64) (an integer, so sums are exact and the same
//                     in any order, on any TP degree); keep each token whose preceding weights sum
//                     to less than top_p * (sum of all weights left). The first always stays.
//   8. draw:          the allowed token maximising x_i + Gumbel(seed, sample_index, i) (in double,
//                     worker/counter_rng.h), ties to the lowest id. This samples exactly from
//                     softmax(x) restricted to the allowed set, and depends on (seed, sample_index,
//                     logits) alone: never on the other rows, the TP degree or the vocabulary split.
// logprob is that of the chosen token under the unmodified distribution, log_softmax of the raw
// logits (global log-sum-exp: per-rank sums in double, combined in rank order, so every rank
// returns the same bits; accurate to ~1e-6 relative), for rows with num_logprobs > 0 (0 for the
// others, which skip the log-sum-exp: one pass over the vocabulary, and for a step of greedy or top-k
// rows the second all-gather); top_logprobs are the num_logprobs largest raw logprobs, descending,
// ties to the lower id.
#pragma once

#include <cstdint>
#include <vector>

#include "comm/communicator.h"
#include "comm/step_plan.h"
#include "common/status.h"

namespace tpserve {

// logits: [S, V_shard] (row-major, S = num_rows), this rank's vocabulary slice
// [vocab_begin, vocab_begin + vocab_shard) of vocab_size in total; seqs[i] is the plan of row i
// (sampling params, sample_index, penalty_tokens). Returns one SequenceResult per row (seq_id,
// token_id, logprob, top_logprobs; no logits), identical on every rank of comm.
// REQUIRES: seqs.size() == num_rows; the slices of the ranks of comm, in rank order, tile
//           [0, vocab_size) (a rank may hold an empty slice); every rank passes the same seqs.
// Errors (the same on every rank, so no rank is left waiting in a collective):
//   INVALID_ARGUMENT  a parameter out of range (top_k < 0, top_p not in (0, 1], min_p not in
//                     [0, 1], repetition_penalty <= 0, num_logprobs < 0, a NaN or +inf parameter,
//                     a bias or penalty token id outside [0, vocab_size)), or a row whose every
//                     token is banned (-inf).
//   INTERNAL          a NaN or +inf logit (a numerical failure upstream).
//   any error of comm's collectives.
StatusOr<std::vector<SequenceResult>> SampleTokens(const float* logits, int64_t num_rows,
                                                   int64_t vocab_begin, int64_t vocab_shard,
                                                   int64_t vocab_size,
                                                   const std::vector<const SequencePlan*>& seqs,
                                                   Communicator& comm);

// The checks SampleTokens makes of one row's parameters (OK or INVALID_ARGUMENT), for callers
// that want to reject a request before it reaches a worker.
Status ValidateSamplingParams(const SamplingParams& params, const std::vector<int32_t>& penalty_tokens,
                              int64_t vocab_size);

}  // namespace tpserve
