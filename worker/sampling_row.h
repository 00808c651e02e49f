// SamplingRow: one row of a SampleTokens batch (worker/sampler.h) and everything the all-gather
// rounds learn about it, plus the two steps that work on a row alone: preparing its processed
// logits, and drawing from an allowed set every rank already holds. Internal to the sampler.
#pragma once

#include <cstdint>
#include <vector>

#include "comm/step_plan.h"
#include "worker/float_packing.h"
#include "worker/gumbel_draw.h"
#include "worker/sampling_candidate.h"

namespace tpserve::sampling {

struct SamplingRow {
  const SequencePlan* plan = nullptr;
  const SamplingParams* params = nullptr;
  bool is_greedy = false;
  bool use_top_k = false;
  bool use_min_p = false;
  bool use_top_p = false;
  int32_t top_k = 0;
  int32_t num_logprobs = 0;
  // The log-sum-exp of the raw logits: only for logprobs (num_logprobs > 0, and every scored prompt
  // token); a round 2 without it sends nothing for a greedy or top-k row.
  bool needs_log_sum_exp = false;
  double log_min_p = 0;
  const float* raw = nullptr;    // [V_shard] unmodified logits
  const float* x = nullptr;      // [V_shard] processed logits (== raw when processing is the identity)
  std::vector<float> processed;  // [V_shard] storage behind x, when it is not raw

  // Round 1.
  Candidate local_best;     // this rank's processed argmax
  bool is_bad = false;      // a NaN or +inf raw logit on some rank
  float raw_max = kNegInf;  // global
  Candidate best;           // global processed argmax
  std::vector<Candidate> top_k_set;     // top-k rows: the global top-k, Before order
  std::vector<Candidate> top_logprobs;  // the global top num_logprobs raw logits (value = raw)
  // Round 2.
  double log_sum_exp = 0;  // of the raw logits, when needs_log_sum_exp
  uint128 nucleus_total = 0;
  // Rounds 3-4.
  std::vector<Candidate> local_nucleus;
  // The outcome.
  GumbelDraw draw;

  bool NeedsNucleusRounds() const { return !is_greedy && !use_top_k && use_top_p; }
};

// The logprob of a token of raw logit `raw` under the row's unmodified distribution: the one
// formula for sampled, top and scored (worker/token_scorer.h) tokens, so they agree bitwise.
// REQUIRES: needs_log_sum_exp, round 2 unpacked (log_sum_exp set).
inline float LogprobOf(const SamplingRow& row, float raw) {
  return static_cast<float>(static_cast<double>(raw) - row.log_sum_exp);
}

// Sets the row's flags from row.params and its logits: raw: [V_shard], this rank's slice; the
// processed logits (steps 1-4 of sampler.h) are computed into row.processed unless the identity.
// REQUIRES: row.plan and row.params set.
void PrepareRow(SamplingRow& row, const float* raw, int64_t vocab_begin, int64_t vocab_shard, int64_t vocab_size);

// Min-p, top-p and the draw over a row's allowed set already known to every rank (top-k rows,
// and the gathered nucleus of the others). sorted: Before order.
void DrawFromCandidates(SamplingRow& row, const std::vector<Candidate>& sorted, bool apply_filters);

}  // namespace tpserve::sampling
