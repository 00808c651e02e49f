// FakeKvWorker: a stand-in worker group for scheduler tests that simulates the paged KV cache.
// Each slot stores the token id whose "K/V" was written there; a step applies the block copies,
// writes every planned token into its slot (through the block table), then, for each sequence
// needing a token, reads its whole context back out of the slots and returns
// NextToken(seq_id, context), and the prompt logprobs of tests/coordinator/fake_prompt_logprobs.h.
// So a wrong block table, a missed copy-on-write or a bad prefix-cache
// hit changes the tokens, and tests compare against ReferenceOutput, which never touches blocks.
// With layer groups (common/kv_groups.h) every group has its own page per block: each token is
// written into every group, the context is read from the first full-attention group, and every key
// a sliding group's query would attend (the window of each position computed) must hold the same
// token there, so a page released too early, or a released page still in the table, fails the test.
// With a draft model (SetDraftModel) the fake also keeps the draft's own slots, addressed by the full
// group's pages as worker/drafting_executor.h addresses them: a plan's draft_catch_up and token_ids
// are written there, the draft's context is read back from them (every position must hold the
// sequence's true token, so a catch-up that skips a position, or trusts a slot a rejected proposal
// wrote, fails the test), and its proposals, DraftToken of that context, are written there too but
// for the last, then verified by the target as plan draft tokens.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <vector>

#include "comm/step_plan.h"
#include "common/kv_groups.h"
#include "coordinator/sequence.h"
#include "tests/coordinator/fake_prompt_logprobs.h"

namespace tpserve::testing_coordinator {

constexpr int32_t kFakeVocab = 1000;

// A model that repeats itself, as text does: the next token depends on the last two only, over a
// small vocabulary, so prompt lookup (coordinator/speculation.h) proposes tokens that are often right.
inline int32_t FakeRepetitiveToken(uint64_t seq_id, const std::vector<int32_t>& context) {
  const size_t n = context.size();
  const uint64_t a = n >= 1 ? static_cast<uint32_t>(context[n - 1]) : 0, b = n >= 2 ? static_cast<uint32_t>(context[n - 2]) : 0;
  uint64_t h = (a * 0x9e3779b97f4a7c15ull) ^ (b * 0xc2b2ae3d27d4eb4full) ^ (seq_id % 3);
  h ^= h >> 29;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 32;
  return static_cast<int32_t>(h % 24) + 1;
}

// A draft model of FakeRepetitiveToken (FakeKvWorker::SetDraftModel) that is wrong at every fifth position.
inline int32_t FakeRepetitiveDraft(uint64_t seq_id, const std::vector<int32_t>& context) {
  const int32_t right = FakeRepetitiveToken(seq_id, context);
  return context.size() % 5 == 3 ? right % 24 + 1 : right;
}

// Deterministic next token for (seq, context): never dependent on the batch or block placement.
inline int32_t FakeNextToken(uint64_t seq_id, const std::vector<int32_t>& context) {
  uint64_t h = 0x243f6a8885a308d3ull ^ (seq_id * 0x9e3779b97f4a7c15ull);
  for (int32_t t : context) {
    h ^= static_cast<uint32_t>(t) + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    h *= 0xff51afd7ed558ccdull;
  }
  h ^= h >> 33;
  return static_cast<int32_t>(h % kFakeVocab);
}

// What a request's sample produces alone, with unlimited memory: the scheduler must match it.
inline std::vector<int32_t> ReferenceOutput(
    uint64_t seq_id, const std::vector<int32_t>& prompt, const StoppingCriteria& stopping, int32_t max_model_len,
    const std::function<int32_t(uint64_t, const std::vector<int32_t>&)>& next_token = FakeNextToken) {
  std::vector<int32_t> context = prompt;
  std::vector<int32_t> output;
  while (true) {
    const int32_t token = next_token(seq_id, context);
    output.push_back(token);
    context.push_back(token);
    const bool eos = !stopping.ignore_eos && stopping.eos_token_id >= 0 && token == stopping.eos_token_id;
    bool stop = eos;
    for (int32_t s : stopping.stop_token_ids) stop |= token == s;
    if (stop || static_cast<int32_t>(output.size()) >= stopping.max_tokens ||
        static_cast<int32_t>(context.size()) >= max_model_len) {
      return output;
    }
  }
}

class FakeKvWorker {
 public:
  // REQUIRES: some group of `groups` attends fully (the context is read from it).
  FakeKvWorker(int32_t num_blocks, int32_t block_size, KvGroups groups = {})
      : num_blocks_(num_blocks),
        block_size_(block_size),
        groups_(std::move(groups)),
        full_group_(static_cast<int32_t>(std::find(groups_.sliding.begin(), groups_.sliding.end(), false) -
                                         groups_.sliding.begin())),
        slots_(num_blocks * block_size, -1),
        draft_slots_(num_blocks * block_size, -1) {
    EXPECT_LT(full_group_, groups_.num_groups()) << "the fake reads its context from a full-attention group";
  }

  StepResult Execute(const StepPlan& drafting_plan) {
    StepResult result;
    result.step_id = drafting_plan.step_id;
    for (const auto& [src, dst] : drafting_plan.block_copies) {
      EXPECT_NE(src, dst);
      for (int32_t j = 0; j < block_size_; ++j) slots_[dst * block_size_ + j] = slots_[src * block_size_ + j];
      for (int32_t j = 0; j < block_size_; ++j) {
        draft_slots_[dst * block_size_ + j] = draft_slots_[src * block_size_ + j];
      }
    }
    const StepPlan plan = Draft(drafting_plan, &result);
    std::vector<int32_t> written_by(slots_.size(), -1);  // plan index that wrote each slot this step
    for (size_t i = 0; i < plan.sequences.size(); ++i) {
      const SequencePlan& sp = plan.sequences[i];
      const int32_t end = sp.num_cached + static_cast<int32_t>(sp.token_ids.size());
      EXPECT_EQ(static_cast<int32_t>(sp.block_table.size()),
                (end + block_size_ - 1) / block_size_ * groups_.num_groups())
          << "seq " << sp.seq_id;
      for (size_t k = 0; k < sp.token_ids.size(); ++k) {
        for (int32_t g = 0; g < groups_.num_groups(); ++g) {
          const int32_t slot = Slot(sp, sp.num_cached + static_cast<int32_t>(k), g);
          if (slot < 0) return result;
          EXPECT_EQ(written_by[slot], -1) << "two sequences write slot " << slot << " in one step";
          written_by[slot] = static_cast<int32_t>(i);
          slots_[slot] = sp.token_ids[k];
        }
      }
    }
    for (const SequencePlan& sp : plan.sequences) {
      if (!CheckWindows(sp)) return result;
    }
    for (const SequencePlan& sp : plan.sequences) {
      if (!sp.prompt_logprobs) continue;
      result.prompt_logprobs.push_back(
          testing::FakeScoreChunk(sp, [&](int32_t pos) {
            const int32_t slot = Slot(sp, pos, full_group_);
            return slot < 0 ? -1 : slots_[static_cast<size_t>(slot)];
          }));
    }
    for (const SequencePlan& sp : plan.sequences) {
      if (!sp.needs_token) continue;
      const int32_t end = sp.num_cached + static_cast<int32_t>(sp.token_ids.size());
      std::vector<int32_t> context;
      for (int32_t pos = 0; pos < end; ++pos) {
        const int32_t slot = Slot(sp, pos, full_group_);
        if (slot < 0) return result;
        EXPECT_GE(slots_[slot], 0) << "seq " << sp.seq_id << " reads an unwritten slot at " << pos;
        context.push_back(slots_[slot]);
      }
      // One row per position sampled: the last 1 + num_draft_tokens, each seeing the context up to it.
      const int32_t first_sampled = end - sp.num_draft_tokens;
      if (!sp.penalty_tokens.empty()) {
        EXPECT_EQ(sp.penalty_tokens, std::vector<int32_t>(context.begin(), context.begin() + first_sampled));
      }
      for (int32_t row_end = first_sampled; row_end <= end; ++row_end) {
        const std::vector<int32_t> seen(context.begin(), context.begin() + row_end);
        SequenceResult r;
        r.seq_id = sp.seq_id;
        r.token_id = NextToken(sp.seq_id, seen);
        r.logprob = -0.5f;
        result.sequences.push_back(r);
      }
      num_draft_rows_ += sp.num_draft_tokens;
    }
    ++num_steps_;
    int64_t num_positions = 0;
    for (const SequencePlan& sp : plan.sequences) num_positions += static_cast<int64_t>(sp.token_ids.size());
    result.compute_ms = fixed_ms_ + per_token_ms_ * static_cast<double>(num_positions);
    return result;
  }

  // Replaces FakeNextToken (e.g. to force an EOS).
  void SetNextToken(std::function<int32_t(uint64_t, const std::vector<int32_t>&)> fn) { override_ = std::move(fn); }
  int32_t NextToken(uint64_t seq_id, const std::vector<int32_t>& context) const {
    return override_ ? override_(seq_id, context) : FakeNextToken(seq_id, context);
  }
  // Reports each step's compute time as fixed_ms + per_token_ms × its positions (default: 0).
  void SetStepCost(double fixed_ms, double per_token_ms) {
    fixed_ms_ = fixed_ms;
    per_token_ms_ = per_token_ms;
  }
  // Gives the group a draft model proposing draft(seq_id, context).
  void SetDraftModel(std::function<int32_t(uint64_t, const std::vector<int32_t>&)> draft) { draft_ = std::move(draft); }
  int64_t num_steps() const { return num_steps_; }
  int64_t num_draft_reads() const { return num_draft_reads_; }  // sequence-steps the draft model read
  int64_t num_draft_rows() const { return num_draft_rows_; }  // proposals verified so far
  // Loses every slot's contents, as a replaced worker group would.
  void WipeKv() {
    std::fill(slots_.begin(), slots_.end(), -1);
    std::fill(draft_slots_.begin(), draft_slots_.end(), -1);
  }

 private:
  // The draft model's part of a step: the plan the target then runs (proposals as draft tokens).
  StepPlan Draft(const StepPlan& plan, StepResult* result) {
    StepPlan verify = plan;
    for (SequencePlan& sp : verify.sequences) {
      if (!sp.draft_model) {
        EXPECT_TRUE(sp.draft_catch_up.empty() && sp.num_proposals == 0) << "seq " << sp.seq_id;
        continue;
      }
      EXPECT_TRUE(draft_) << "a plan asks for a draft model the group does not have";
      if (!draft_) continue;
      ++num_draft_reads_;
      const int32_t first = sp.num_cached - static_cast<int32_t>(sp.draft_catch_up.size());
      std::vector<int32_t> read = sp.draft_catch_up;
      read.insert(read.end(), sp.token_ids.begin(), sp.token_ids.end());
      for (size_t k = 0; k < read.size(); ++k) {
        const int32_t slot = Slot(sp, first + static_cast<int32_t>(k), full_group_);
        if (slot >= 0) draft_slots_[slot] = read[k];
      }
      const int32_t end = sp.num_cached + static_cast<int32_t>(sp.token_ids.size());
      std::vector<int32_t> context;
      for (int32_t pos = 0; pos < end; ++pos) {
        const int32_t slot = Slot(sp, pos, full_group_);
        if (slot < 0) return verify;
        context.push_back(draft_slots_[slot]);
        const int32_t truth = pos < sp.num_cached ? slots_[slot] : sp.token_ids[pos - sp.num_cached];
        EXPECT_EQ(draft_slots_[slot], truth) << "seq " << sp.seq_id << ": the draft model's K/V at " << pos
                                             << " is not the sequence's token";
      }
      if (sp.num_proposals == 0) continue;
      DraftProposal& proposal = result->proposals.emplace_back();
      proposal.seq_id = sp.seq_id;
      for (int32_t j = 0; j < sp.num_proposals; ++j) {
        if (j > 0) {  // the draft computes the K/V of each proposal it reads to make the next
          const int32_t slot = Slot(sp, end + j - 1, full_group_);
          if (slot >= 0) draft_slots_[slot] = context.back();
        }
        proposal.token_ids.push_back(draft_(sp.seq_id, context));
        context.push_back(proposal.token_ids.back());
      }
      sp.token_ids.insert(sp.token_ids.end(), proposal.token_ids.begin(), proposal.token_ids.end());
      sp.num_draft_tokens = sp.num_proposals;
      sp.draft_model = false;
      sp.draft_catch_up.clear();
      sp.num_proposals = 0;
    }
    return verify;
  }

  int32_t Slot(const SequencePlan& sp, int32_t pos, int32_t group) {
    const size_t index = static_cast<size_t>(pos / block_size_ * groups_.num_groups() + group);
    if (index >= sp.block_table.size()) {
      ADD_FAILURE() << "seq " << sp.seq_id << " position " << pos << " beyond its block table";
      return -1;
    }
    const int32_t block = sp.block_table[index];
    if (block < 0 || block >= num_blocks_) {
      ADD_FAILURE() << "seq " << sp.seq_id << " group " << group << " position " << pos << ": page " << block
                    << " out of range (released too early?)";
      return -1;
    }
    return block * block_size_ + pos % block_size_;
  }

  // Every key a sliding group's query reads in this step holds what the full group holds there.
  bool CheckWindows(const SequencePlan& sp) {
    const int32_t end = sp.num_cached + static_cast<int32_t>(sp.token_ids.size());
    const int32_t first_key = std::max(0, sp.num_cached - groups_.window + 1);
    for (int32_t g = 0; g < groups_.num_groups(); ++g) {
      if (!groups_.sliding[g]) continue;
      for (int32_t pos = first_key; pos < end; ++pos) {
        const int32_t slot = Slot(sp, pos, g), full = Slot(sp, pos, full_group_);
        if (slot < 0 || full < 0) return false;
        EXPECT_EQ(slots_[slot], slots_[full]) << "seq " << sp.seq_id << " group " << g << " position " << pos;
      }
    }
    return true;
  }

  const int32_t num_blocks_;
  const int32_t block_size_;
  const KvGroups groups_;
  const int32_t full_group_;
  std::vector<int32_t> slots_;  // [num_blocks * block_size] token id stored in each KV slot
  std::vector<int32_t> draft_slots_;  // [num_blocks * block_size] the draft model's, by the full group's pages
  std::function<int32_t(uint64_t, const std::vector<int32_t>&)> override_;
  std::function<int32_t(uint64_t, const std::vector<int32_t>&)> draft_;
  int64_t num_draft_reads_ = 0;
  double fixed_ms_ = 0;
  double per_token_ms_ = 0;
  int64_t num_steps_ = 0;
  int64_t num_draft_rows_ = 0;
};

}  // namespace tpserve::testing_coordinator
