// StepBatch: one StepPlan checked and flattened into the per-token arrays a model's forward pass
// takes — the host side of a step, the same for every executor (CPU ModelExecutor, CUDA executor).
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

#include "comm/step_plan.h"
#include "common/kv_groups.h"
#include "common/status.h"

namespace tpserve {

struct StepBatch {
  std::vector<int32_t> token_ids;     // [T]
  std::vector<int32_t> positions;     // [T] absolute position of each token in its sequence
  std::vector<int32_t> token_seq;     // [T] sequence index s in [0, S)
  std::vector<int32_t> slot_mapping;  // [G, T] cache slot = page * block_size + offset, per layer group
  // [G, S, max_blocks_per_seq] pages per layer group (padding and released pages are 0, never read)
  std::vector<int32_t> block_tables;
  int64_t max_blocks_per_seq = 1;
  // Token index of each row whose logits the LM head computes: the sampled rows first, then the
  // scored rows of the sequences with prompt_logprobs (plan order, position order within one).
  // A sequence with draft tokens has 1 + num_draft_tokens sampled rows (its last positions).
  std::vector<int32_t> logit_rows;                // [S_sampled + R]
  // The plan each sampled row draws with: a sequence's own plan for its first row, and for the
  // row after draft j a plan of what plain decoding would have sent there (draft_rows).
  std::vector<const SequencePlan*> sampled_seqs;  // [S_sampled] borrowed from the plan or draft_rows
  std::deque<SequencePlan> draft_rows;            // seq_id, sampling, sample_index, penalty_tokens only
  std::vector<int32_t> score_targets;             // [R] the prompt token each scored row predicts
  std::vector<int32_t> score_num_logprobs;        // [R] top alternatives each scored row reports
  std::vector<const SequencePlan*> scored_seqs;   // [S_scoring] the plans with prompt_logprobs

  int64_t num_tokens() const { return static_cast<int64_t>(token_ids.size()); }
  int64_t num_logit_rows() const { return static_cast<int64_t>(logit_rows.size()); }
  int64_t num_sampled_rows() const { return static_cast<int64_t>(sampled_seqs.size()); }
};

// The plan errors an executor must refuse before touching its cache, all INVALID_ARGUMENT: a block
// copy or page id outside [0, num_kv_blocks), a block table too short for its positions and layer
// groups (SequencePlan::block_table is [logical block][group], common/kv_groups.h), a released page
// (-1) that a sliding group's window still reads or a full group's page, a token id
// outside [0, vocab_size) (next_prompt_token included), an empty sequence, a negative num_cached,
// bad sampling parameters, a negative num_logprobs with prompt_logprobs, draft tokens that are not
// a strict tail of token_ids or come without needs_token or with prompt_logprobs, a draft model asked
// for (worker/drafting_executor.h answers those plans before they reach an executor).
Status ValidateStepPlan(const StepPlan& plan, int64_t num_kv_blocks, int block_size, int vocab_size,
                        const KvGroups& groups = {});

// Rebuilds *batch from `plan` (sequences in plan order). REQUIRES: ValidateStepPlan(plan, ...) is OK.
// The batch borrows the plan's SequencePlans: keep the plan alive while the batch is used.
Status FlattenStepPlan(const StepPlan& plan, int block_size, int64_t num_kv_blocks, StepBatch* batch,
                       const KvGroups& groups = {});

}  // namespace tpserve
