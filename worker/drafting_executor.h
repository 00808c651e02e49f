// DraftingExecutor: a rank's target executor with a draft model beside it, for speculative decoding
// by a draft model (coordinator/speculation.h). Both are executors of the same tensor-parallel group
// (the draft is sharded like the target, over the same communicator), so every rank runs the same
// sequence of steps and the collectives stay in step.
//
// For the sequences of a plan with draft_model (comm/step_plan.h), one Execute
//   1. runs the draft model over each one's catch-up tokens and token_ids (the plan's block copies
//      first), and draws its first proposal where num_proposals > 0;
//   2. runs it num_proposals - 1 more steps of one token each, drawing each next proposal;
//   3. runs the target over the plan with the proposals appended as draft tokens, which samples
//      after each one exactly as plain decoding would, and returns the proposals in
//      StepResult::proposals.
// A proposal is drawn with the target's own sampling settings, sample index and penalties at that
// position: under seeded sampling the draft then makes the same random choice the target will make
// whenever their distributions are close, which is what lets sampled sequences keep proposals too.
// Plans without draft_model go to the target unchanged.
//
// The draft's KV cache is its own pool with as many pages as the target's, addressed by the page ids
// of the target's first full-attention layer group: the coordinator's block manager then allocates,
// forks, copies and frees the draft's pages along with the target's, and a draft page is never read
// past what the draft has written into it for the same tokens.
#pragma once

#include <memory>

#include "comm/communicator.h"
#include "common/kv_groups.h"
#include "common/status.h"
#include "worker/device_executor.h"
#include "worker/step_executor.h"

namespace tpserve {

class ModelFile;

class DraftingExecutor : public StepExecutor {
 public:
  // `target` and `draft` run on the same group; `target_groups` are the target's KV layer groups.
  // Errors: INVALID_ARGUMENT when the vocabularies differ or no target group is full-attention (a
  // draft page must live as long as the sequence).
  static StatusOr<std::unique_ptr<DraftingExecutor>> Create(std::unique_ptr<StepExecutor> target,
                                                            const KvGroups& target_groups, int target_vocab,
                                                            std::unique_ptr<StepExecutor> draft, int draft_vocab);

  StatusOr<StepResult> Execute(const StepPlan& plan) override;

 private:
  DraftingExecutor(std::unique_ptr<StepExecutor> target, std::unique_ptr<StepExecutor> draft, int num_groups,
                   int full_group)
      : target_(std::move(target)), draft_(std::move(draft)), num_groups_(num_groups), full_group_(full_group) {}

  // The draft's block table: the pages of the target's full group, one per logical block.
  std::vector<int32_t> DraftTable(const std::vector<int32_t>& target_table) const;
  // Steps 1-2: the proposals of every sequence of `plan` with num_proposals > 0, in plan order.
  StatusOr<std::vector<DraftProposal>> Propose(const StepPlan& plan, double* compute_ms);

  std::unique_ptr<StepExecutor> target_;
  std::unique_ptr<StepExecutor> draft_;
  int num_groups_ = 1;
  int full_group_ = 0;
};

// `target` (this rank's loaded target shard) with the draft model `draft_file` loaded beside it on
// the same device and group: its KV pool gets the target's page count, with `options`' block size,
// KV type and threads, one page per block for all its layers. Errors: DraftingExecutor::Create's, and
// the draft executor's (LoadShard).
StatusOr<LoadedShard> LoadDraftingShard(LoadedShard target, const ModelFile& target_file, Device device,
                                        const ModelFile& draft_file, Communicator* comm, ExecutorOptions options);

}  // namespace tpserve
