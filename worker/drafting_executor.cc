#include "worker/drafting_executor.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "common/logging.h"
#include "model/model_file.h"
#include "worker/model_executor.h"

namespace tpserve {

StatusOr<std::unique_ptr<DraftingExecutor>> DraftingExecutor::Create(std::unique_ptr<StepExecutor> target,
                                                                     const KvGroups& target_groups,
                                                                     int target_vocab,
                                                                     std::unique_ptr<StepExecutor> draft,
                                                                     int draft_vocab) {
  if (target_vocab != draft_vocab) {
    return InvalidArgument("the draft model's vocabulary has " + std::to_string(draft_vocab) +
                           " tokens and the target's " + std::to_string(target_vocab) + ": they must share one");
  }
  const auto full = std::find(target_groups.sliding.begin(), target_groups.sliding.end(), false);
  if (full == target_groups.sliding.end()) {
    return InvalidArgument("a draft model needs a target with a full-attention layer group; this one's layers "
                           "all slide (run the worker with --sliding-kv keep)");
  }
  return std::unique_ptr<DraftingExecutor>(
      new DraftingExecutor(std::move(target), std::move(draft), target_groups.num_groups(),
                           static_cast<int>(full - target_groups.sliding.begin())));
}

std::vector<int32_t> DraftingExecutor::DraftTable(const std::vector<int32_t>& target_table) const {
  std::vector<int32_t> table;
  table.reserve(target_table.size() / num_groups_);
  for (size_t b = full_group_; b < target_table.size(); b += num_groups_) table.push_back(target_table[b]);
  return table;
}

StatusOr<std::vector<DraftProposal>> DraftingExecutor::Propose(const StepPlan& plan, double* compute_ms) {
  // The draft's first step: catch-up ++ own tokens of every sequence it reads, the copies first.
  StepPlan step;
  step.step_id = plan.step_id;
  step.block_copies = plan.block_copies;
  std::vector<DraftProposal> proposals;
  std::vector<int32_t> wanted;  // [proposing sequences] num_proposals
  for (const SequencePlan& seq : plan.sequences) {
    if (!seq.draft_model) continue;
    SequencePlan& d = step.sequences.emplace_back();
    d.seq_id = seq.seq_id;
    d.num_cached = seq.num_cached - static_cast<int32_t>(seq.draft_catch_up.size());
    d.token_ids = seq.draft_catch_up;
    d.token_ids.insert(d.token_ids.end(), seq.token_ids.begin(), seq.token_ids.end());
    d.block_table = DraftTable(seq.block_table);
    d.needs_token = seq.num_proposals > 0;
    if (!d.needs_token) continue;
    d.sampling = seq.sampling;
    d.sampling.num_logprobs = 0;
    d.sample_index = seq.sample_index;
    d.penalty_tokens = seq.penalty_tokens;
    proposals.push_back({seq.seq_id, {}});
    wanted.push_back(seq.num_proposals);
  }
  // Then one token per step for the sequences that want more, each drawn at the next sample index
  // with the proposals before it counted by the penalties (as the target's verification rows do).
  while (!step.sequences.empty()) {
    ASSIGN_OR_RETURN(StepResult drawn, draft_->Execute(step));
    *compute_ms += drawn.compute_ms;
    StepPlan next;
    next.step_id = plan.step_id;
    size_t row = 0;
    size_t p = 0;
    for (SequencePlan& d : step.sequences) {
      if (!d.needs_token) continue;
      while (proposals[p].seq_id != d.seq_id) ++p;
      CHECK_LT(row, drawn.sequences.size());
      const int32_t token = drawn.sequences[row++].token_id;
      if (token < 0) continue;  // nothing drawable: fewer proposals
      proposals[p].token_ids.push_back(token);
      if (static_cast<int32_t>(proposals[p].token_ids.size()) == wanted[p]) continue;
      SequencePlan& after = next.sequences.emplace_back();
      after.seq_id = d.seq_id;
      after.num_cached = d.num_cached + static_cast<int32_t>(d.token_ids.size());
      after.token_ids = {token};
      after.block_table = std::move(d.block_table);
      after.needs_token = true;
      after.sampling = d.sampling;
      after.sample_index = d.sample_index + 1;
      after.penalty_tokens = std::move(d.penalty_tokens);
      if (after.sampling.has_penalties()) after.penalty_tokens.push_back(token);
    }
    step = std::move(next);
  }
  return proposals;
}

StatusOr<StepResult> DraftingExecutor::Execute(const StepPlan& plan) {
  const bool drafts = std::any_of(plan.sequences.begin(), plan.sequences.end(),
                                  [](const SequencePlan& seq) { return seq.draft_model; });
  if (!drafts) return target_->Execute(plan);
  double draft_ms = 0;
  ASSIGN_OR_RETURN(std::vector<DraftProposal> proposals, Propose(plan, &draft_ms));
  StepPlan verify = plan;
  size_t p = 0;
  for (SequencePlan& seq : verify.sequences) {
    const bool proposes = seq.num_proposals > 0;
    seq.draft_model = false;
    seq.draft_catch_up.clear();
    seq.num_proposals = 0;
    if (!proposes) continue;
    const std::vector<int32_t>& ids = proposals[p++].token_ids;
    seq.token_ids.insert(seq.token_ids.end(), ids.begin(), ids.end());
    seq.num_draft_tokens = static_cast<int32_t>(ids.size());
  }
  ASSIGN_OR_RETURN(StepResult result, target_->Execute(verify));
  result.compute_ms += draft_ms;
  result.proposals = std::move(proposals);
  return result;
}

StatusOr<LoadedShard> LoadDraftingShard(LoadedShard target, const ModelFile& target_file, Device device,
                                        const ModelFile& draft_file, Communicator* comm, ExecutorOptions options) {
  const KvGroups target_groups = ExecutorKvLayout(target_file.config(), options).groups;
  options.num_kv_blocks = target.num_kv_blocks;
  options.free_sliding_kv = false;
  ASSIGN_OR_RETURN(LoadedShard draft, LoadShard(device, draft_file, comm, options));
  ASSIGN_OR_RETURN(std::unique_ptr<DraftingExecutor> drafting,
                   DraftingExecutor::Create(std::move(target.executor), target_groups,
                                            target_file.config().vocab_size, std::move(draft.executor),
                                            draft_file.config().vocab_size));
  return LoadedShard{std::move(drafting), target.num_kv_blocks};
}

}  // namespace tpserve
