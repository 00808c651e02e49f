#include "worker/step_batch.h"

#include <algorithm>
#include <string>

#include "kvstore/slot_mapping.h"
#include "worker/sampler.h"

namespace tpserve {
namespace {

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

Status ValidateStepPlan(const StepPlan& plan, int64_t num_kv_blocks, int block_size, int vocab_size,
                        const KvGroups& groups) {
  const int64_t num_groups = groups.num_groups();
  for (const auto& [src, dst] : plan.block_copies) {
    if (src < 0 || src >= num_kv_blocks || dst < 0 || dst >= num_kv_blocks) {
      return InvalidArgument("block copy " + std::to_string(src) + " -> " + std::to_string(dst) + " outside the " +
                             std::to_string(num_kv_blocks) + " KV blocks");
    }
  }
  for (const SequencePlan& seq : plan.sequences) {
    const std::string where = "sequence " + std::to_string(seq.seq_id) + ": ";
    if (seq.token_ids.empty()) return InvalidArgument(where + "no tokens");
    if (seq.num_cached < 0) return InvalidArgument(where + "negative num_cached");
    for (int32_t id : seq.token_ids) {
      if (id < 0 || id >= vocab_size) {
        return InvalidArgument(where + "token id " + std::to_string(id) + " outside the vocabulary of " +
                               std::to_string(vocab_size));
      }
    }
    if (seq.prompt_logprobs) {
      if (seq.next_prompt_token < -1 || seq.next_prompt_token >= vocab_size) {
        return InvalidArgument(where + "next prompt token " + std::to_string(seq.next_prompt_token) +
                               " outside the vocabulary of " + std::to_string(vocab_size));
      }
      if (seq.sampling.num_logprobs < 0) return InvalidArgument(where + "num_logprobs must be >= 0");
    }
    if (seq.num_draft_tokens < 0 || seq.num_draft_tokens >= static_cast<int64_t>(seq.token_ids.size())) {
      return InvalidArgument(where + std::to_string(seq.num_draft_tokens) + " draft tokens of " +
                             std::to_string(seq.token_ids.size()));
    }
    if (seq.num_draft_tokens > 0 && (!seq.needs_token || seq.prompt_logprobs)) {
      return InvalidArgument(where + "draft tokens need needs_token and no prompt_logprobs");
    }
    if (seq.draft_model) {
      return InvalidArgument(where + "asks for a draft model, and this worker group has none "
                             "(tpserve-worker --draft-model)");
    }
    if (seq.needs_token) {
      Status sampling = ValidateSamplingParams(seq.sampling, seq.penalty_tokens, vocab_size);
      if (!sampling.ok()) return InvalidArgument(where + sampling.message());
    }
    const int64_t num_positions = int64_t{seq.num_cached} + static_cast<int64_t>(seq.token_ids.size());
    const int64_t needed = CeilDiv(num_positions, block_size) * num_groups;
    if (static_cast<int64_t>(seq.block_table.size()) < needed) {
      return InvalidArgument(where + "block table has " + std::to_string(seq.block_table.size()) +
                             " pages, positions up to " + std::to_string(num_positions) + " in " +
                             std::to_string(num_groups) + " layer groups need " + std::to_string(needed));
    }
    // A sliding group's queries in this step read keys from num_cached - window + 1 on.
    const int64_t first_live = groups.FirstLiveBlock(seq.num_cached, block_size);
    for (int64_t i = 0; i < needed; ++i) {
      const int32_t page = seq.block_table[i];
      if (page == -1 && groups.sliding[i % num_groups] && i / num_groups < first_live) continue;
      if (page < 0 || page >= num_kv_blocks) {
        return InvalidArgument(where + "block id " + std::to_string(page) + " outside the " +
                               std::to_string(num_kv_blocks) + " KV blocks");
      }
    }
  }
  return OkStatus();
}

Status FlattenStepPlan(const StepPlan& plan, int block_size, int64_t num_kv_blocks, StepBatch* batch,
                       const KvGroups& groups) {
  const int64_t num_groups = groups.num_groups();
  batch->token_ids.clear();
  batch->positions.clear();
  batch->token_seq.clear();
  batch->logit_rows.clear();
  batch->sampled_seqs.clear();
  batch->draft_rows.clear();
  batch->score_targets.clear();
  batch->score_num_logprobs.clear();
  batch->scored_seqs.clear();
  batch->max_blocks_per_seq = 1;
  std::vector<int32_t> score_rows;  // [R], appended to logit_rows after the sampled rows
  for (const SequencePlan& seq : plan.sequences) {
    const int64_t num_positions = int64_t{seq.num_cached} + static_cast<int64_t>(seq.token_ids.size());
    batch->max_blocks_per_seq = std::max(batch->max_blocks_per_seq, CeilDiv(num_positions, block_size));
  }
  const int64_t num_seqs = static_cast<int64_t>(plan.sequences.size());
  int64_t num_tokens = 0;
  for (const SequencePlan& seq : plan.sequences) num_tokens += static_cast<int64_t>(seq.token_ids.size());
  const int64_t group_stride = num_seqs * batch->max_blocks_per_seq;
  batch->block_tables.assign(num_groups * group_stride, 0);
  batch->slot_mapping.resize(num_groups * num_tokens);
  std::vector<int32_t> group_table;  // one group's column of a sequence's table
  for (int64_t s = 0; s < num_seqs; ++s) {
    const SequencePlan& seq = plan.sequences[s];
    const int64_t n = static_cast<int64_t>(seq.token_ids.size());
    const int64_t needed = CeilDiv(seq.num_cached + n, block_size);
    const size_t first = batch->token_ids.size();
    for (int64_t g = 0; g < num_groups; ++g) {
      group_table.resize(needed);
      for (int64_t b = 0; b < needed; ++b) group_table[b] = std::max(0, seq.block_table[b * num_groups + g]);
      std::copy(group_table.begin(), group_table.end(),
                batch->block_tables.begin() + g * group_stride + s * batch->max_blocks_per_seq);
      RETURN_IF_ERROR(ComputeSlotMapping(group_table, seq.num_cached, n, block_size,
                                         batch->slot_mapping.data() + g * num_tokens + first, num_kv_blocks));
    }
    for (int64_t i = 0; i < n; ++i) {
      batch->token_ids.push_back(seq.token_ids[i]);
      batch->positions.push_back(static_cast<int32_t>(seq.num_cached + i));
      batch->token_seq.push_back(static_cast<int32_t>(s));
    }
    if (seq.needs_token) {
      const int64_t first_row = n - 1 - seq.num_draft_tokens;
      batch->logit_rows.push_back(static_cast<int32_t>(first + first_row));
      batch->sampled_seqs.push_back(&seq);
      for (int64_t j = 1; j <= seq.num_draft_tokens; ++j) {
        // What plain decoding would send after drafts 1..j had been sampled.
        SequencePlan& row = batch->draft_rows.emplace_back();
        row.seq_id = seq.seq_id;
        row.needs_token = true;
        row.sampling = seq.sampling;
        row.sample_index = seq.sample_index + static_cast<uint32_t>(j);
        if (!seq.penalty_tokens.empty()) {
          row.penalty_tokens = seq.penalty_tokens;
          row.penalty_tokens.insert(row.penalty_tokens.end(), seq.token_ids.begin() + first_row + 1,
                                    seq.token_ids.begin() + first_row + 1 + j);
        }
        batch->logit_rows.push_back(static_cast<int32_t>(first + first_row + j));
        batch->sampled_seqs.push_back(&row);
      }
    }
    if (seq.prompt_logprobs) {
      batch->scored_seqs.push_back(&seq);
      const int64_t num_scored = seq.num_prompt_logprobs();
      for (int64_t i = 0; i < num_scored; ++i) {
        score_rows.push_back(static_cast<int32_t>(first + i));
        batch->score_targets.push_back(i + 1 < n ? seq.token_ids[i + 1] : seq.next_prompt_token);
        batch->score_num_logprobs.push_back(seq.sampling.num_logprobs);
      }
    }
  }
  batch->logit_rows.insert(batch->logit_rows.end(), score_rows.begin(), score_rows.end());
  return OkStatus();
}

}  // namespace tpserve
