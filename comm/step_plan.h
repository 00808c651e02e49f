// StepPlan and StepResult: the plain data the coordinator sends a worker group for one engine
// step, and what comes back. Workers keep no request state between steps beyond the KV cache
// contents the block tables point at. Serialised with Cap'n Proto (comm/schema/worker.capnp).
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace tpserve {

struct SamplingParams {
  float temperature = 0.0f;  // 0: greedy
  int32_t top_k = 0;         // 0: off
  float top_p = 1.0f;        // 1: off
  float min_p = 0.0f;        // 0: off
  float repetition_penalty = 1.0f;
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  uint64_t seed = 0;
  // Whether the client gave `seed`. Without one the coordinator draws a fresh seed per request and
  // sets has_seed; workers use `seed` as it is either way.
  bool has_seed = false;
  std::vector<std::pair<int32_t, float>> logit_bias;  // (token id, added to its logit)
  int32_t num_logprobs = 0;                           // top-n logprobs to return (0: none)

  bool is_greedy() const { return temperature <= 0.0f; }
  bool has_penalties() const {
    return repetition_penalty != 1.0f || presence_penalty != 0.0f || frequency_penalty != 0.0f;
  }
};

// One sequence's share of a step: a prefill chunk (several tokens) or a decode (one token).
struct SequencePlan {
  uint64_t seq_id = 0;               // unique per sequence (request id × sample index)
  int32_t num_cached = 0;            // tokens already in the KV cache = position of token_ids[0]
  std::vector<int32_t> token_ids;    // [n] new tokens whose K/V this step computes and stores
  std::vector<int32_t> block_table;  // physical KV block ids covering positions [0, num_cached + n)
  bool needs_token = false;          // sample (or return logits) after the last of token_ids
  SamplingParams sampling;
  // Counter of the generator: the index of the token being sampled within its sequence's output,
  // so the draw depends on (sampling.seed, sample_index, token id) alone, never on the batch. The
  // samples of one request carry distinct seeds (the coordinator derives them).
  uint32_t sample_index = 0;
  // Tokens the penalties look at (prompt + generated so far). Empty unless has_penalties().
  std::vector<int32_t> penalty_tokens;
  // Score the prompt tokens this chunk's positions predict (StepResult::prompt_logprobs): position
  // num_cached + j predicts token_ids[j + 1], the last one predicts next_prompt_token (-1: the
  // chunk ends the prompt, and its last position predicts a generated token instead). The top-n
  // alternatives are sampling.num_logprobs.
  bool prompt_logprobs = false;
  int32_t next_prompt_token = -1;
  // Speculative decoding: the last num_draft_tokens of token_ids are proposed continuations, not
  // yet verified. With needs_token the step samples after each of the last 1 + num_draft_tokens
  // tokens: row j (0-based) with sample_index + j, its penalties also counting the j drafts before
  // it, exactly the draw plain decoding would make there had the drafts before it been sampled.
  // The coordinator keeps the longest prefix of drafts equal to the sampled tokens.
  // REQUIRES: num_draft_tokens < token_ids.size(); > 0 only with needs_token and without prompt_logprobs.
  int32_t num_draft_tokens = 0;
  // Draft-model speculation (worker/drafting_executor.h). With draft_model, the group's draft model
  // first reads draft_catch_up (the tokens at positions [num_cached - n_c, num_cached) whose K/V it
  // has not computed, n_c = draft_catch_up.size()) and token_ids, into its own KV pages (the same page
  // ids as the target's first full-attention group). With num_proposals > 0 it then proposes that many
  // tokens, each drawn as the target would draw it there (the same sampling, sample_index + j and
  // penalties over the proposals before it), and the step verifies them as num_draft_tokens.
  // REQUIRES: n_c <= num_cached; num_proposals > 0 only with draft_model and needs_token, without
  // prompt_logprobs or num_draft_tokens of the plan's own; catch-up and proposals only with draft_model.
  bool draft_model = false;
  std::vector<int32_t> draft_catch_up;
  int32_t num_proposals = 0;

  // The number of positions prompt_logprobs scores in this chunk.
  int32_t num_prompt_logprobs() const {
    if (!prompt_logprobs) return 0;
    return static_cast<int32_t>(token_ids.size()) - (next_prompt_token < 0 ? 1 : 0);
  }
};

struct StepPlan {
  uint64_t step_id = 0;
  std::vector<SequencePlan> sequences;
  std::vector<std::pair<int32_t, int32_t>> block_copies;  // (src, dst) copy-on-write, run first
  bool return_logits = false;                             // tests: full logits for rows needing a token
};

struct TokenLogprob {
  int32_t token_id = 0;
  float logprob = 0.0f;
};

struct SequenceResult {
  uint64_t seq_id = 0;
  int32_t token_id = -1;
  // Of the sampled token under the unmodified distribution, when sampling.num_logprobs > 0 (beam search
  // asks for 2 x width); 0 otherwise: a step whose rows ask for no logprobs computes no log-sum-exp.
  float logprob = 0.0f;
  std::vector<TokenLogprob> top_logprobs;  // [num_logprobs]
  std::vector<float> logits;              // [V], only when StepPlan::return_logits
};

// One scored prompt token: its logprob given the tokens before it, bitwise what SequenceResult
// would report had the engine sampled (or been forced to) that token at that position.
struct PromptTokenLogprob {
  int32_t token_id = 0;
  float logprob = 0.0f;
  std::vector<TokenLogprob> top_logprobs;  // [num_logprobs], most likely first
};

struct PromptLogprobsResult {
  uint64_t seq_id = 0;
  std::vector<PromptTokenLogprob> positions;  // [SequencePlan::num_prompt_logprobs()], in position order
};

// A draft model's proposals for one sequence (SequencePlan::num_proposals), in order.
struct DraftProposal {
  uint64_t seq_id = 0;
  std::vector<int32_t> token_ids;  // [num_proposals]
};

struct StepResult {
  uint64_t step_id = 0;
  // 1 + num_draft_tokens (or num_proposals) per SequencePlan with needs_token (its rows in position
  // order), in plan order.
  std::vector<SequenceResult> sequences;
  double compute_ms = 0;
  double allreduce_ms = 0;
  std::vector<PromptLogprobsResult> prompt_logprobs;  // one per SequencePlan with prompt_logprobs, in plan order
  std::vector<DraftProposal> proposals;               // one per SequencePlan with num_proposals > 0, in plan order
};

}  // namespace tpserve
