// SchedulerHarness: a Scheduler driven step by step against a FakeKvWorker, recording the events,
// with helpers for table-driven expectations (plan, running and waiting sets, blocks in use)
// and for comparing every finished sample with what it produces alone.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <numeric>
#include <set>
#include <utility>
#include <vector>

#include "coordinator/scheduler.h"
#include "tests/coordinator/fake_kv_worker.h"

namespace tpserve::testing_coordinator {

constexpr int32_t kBlockSize = 4;

inline uint64_t S(uint64_t request_id, int32_t sample = 0) { return SequenceIdOf(request_id, sample); }

inline std::vector<int32_t> Iota(int32_t n, int32_t start) {
  std::vector<int32_t> v(n);
  std::iota(v.begin(), v.end(), start);
  return v;
}

inline ScheduleRequest Request(uint64_t id, std::vector<int32_t> prompt, int32_t max_tokens, int32_t n = 1) {
  ScheduleRequest r;
  r.request_id = id;
  r.prompt_ids = std::move(prompt);
  r.stopping.max_tokens = max_tokens;
  r.num_samples = n;
  return r;
}

struct StepExpect {
  std::vector<std::pair<uint64_t, int32_t>> scheduled;  // (seq id, new tokens) in plan order
  std::set<uint64_t> running;                           // after Schedule()
  std::set<uint64_t> waiting;                           // after Schedule()
  int32_t used_blocks;                                  // after Schedule()
};

// A scheduler, a fake worker group, and everything the events said.
class SchedulerHarness {
 public:
  // num_blocks: pages; groups: the worker's layer groups (default: one full group).
  SchedulerHarness(const SchedulerConfig& config, int32_t num_blocks, const KvGroups& groups = {})
      : scheduler_(config, num_blocks, kBlockSize, groups), worker_(num_blocks, kBlockSize, groups), config_(config) {
    scheduler_.SetClock([this] { return now_; });
  }

  void Add(ScheduleRequest r) {
    requests_[r.request_id] = r;
    for (int32_t i = 0; i < r.num_samples; ++i) ids_.insert(S(r.request_id, i));
    const Status added = scheduler_.Add(std::move(r));
    ASSERT_TRUE(added.ok()) << added.ToString();
  }

  // One engine step; returns the plan.
  StepPlan Step() {
    now_ += 1.0;
    StepPlan plan = scheduler_.Schedule();
    last_running_.clear();
    last_waiting_.clear();
    for (uint64_t id : ids_) {
      const Sequence* seq = scheduler_.FindSequence(id);
      if (seq == nullptr) continue;
      (seq->status == SequenceStatus::kRunning ? last_running_ : last_waiting_).insert(id);
    }
    last_used_ = scheduler_.Stats().blocks.num_used;
    int32_t total = 0;
    for (const SequencePlan& sp : plan.sequences) total += static_cast<int32_t>(sp.token_ids.size());
    EXPECT_LE(total, config_.max_num_batched_tokens);
    EXPECT_LE(scheduler_.num_running(), config_.max_num_seqs);
    Digest(plan);
    if (plan.sequences.empty()) return plan;
    const StepResult result = worker_.Execute(plan);
    auto events = scheduler_.Postprocess(plan, result);
    EXPECT_TRUE(events.ok()) << events.status().ToString();
    if (!events.ok()) return plan;
    for (const SequenceEvent& e : *events) {
      if (e.token_id >= 0) outputs_[e.seq_id].push_back(e.token_id);
      if (e.is_finished) finished_[e.seq_id] = e;
      if (e.has_prompt_logprobs) prompt_logprobs_[e.seq_id].push_back(e);
    }
    const BlockStats b = scheduler_.Stats().blocks;
    EXPECT_EQ(b.num_used + b.num_cached + b.num_free, b.num_blocks);
    EXPECT_LE(scheduler_.num_running(), config_.max_num_seqs);  // forks included
    return plan;
  }

  void ExpectStep(const StepExpect& want, int step) {
    const StepPlan plan = Step();
    std::vector<std::pair<uint64_t, int32_t>> got;
    for (const SequencePlan& sp : plan.sequences) got.emplace_back(sp.seq_id, static_cast<int32_t>(sp.token_ids.size()));
    EXPECT_EQ(got, want.scheduled) << "step " << step;
    EXPECT_EQ(last_running_, want.running) << "step " << step;
    EXPECT_EQ(last_waiting_, want.waiting) << "step " << step;
    EXPECT_EQ(last_used_, want.used_blocks) << "step " << step;
  }

  void RunToCompletion(int max_steps = 10000) {
    for (int i = 0; i < max_steps && scheduler_.has_unfinished(); ++i) {
      const StepPlan plan = Step();
      ASSERT_FALSE(plan.sequences.empty()) << "stuck with unfinished sequences";
    }
    ASSERT_FALSE(scheduler_.has_unfinished());
  }

  // Every finished sample produced exactly what it produces alone.
  void ExpectReferenceOutputs() {
    for (const auto& [request_id, r] : requests_) {
      for (int32_t i = 0; i < r.num_samples; ++i) {
        const uint64_t id = S(request_id, i);
        if (!finished_.count(id) || finished_[id].finish_reason == FinishReason::kCancelled) continue;
        EXPECT_EQ(outputs_[id],
                  ReferenceOutput(id, r.prompt_ids, r.stopping, config_.max_model_len,
                                  [this](uint64_t seq, const std::vector<int32_t>& context) {
                                    return worker_.NextToken(seq, context);
                                  }))
            << "seq " << id;
      }
    }
  }

  void ExpectNoLeaks() {
    const BlockStats b = scheduler_.Stats().blocks;
    EXPECT_EQ(b.num_used, 0);
    EXPECT_EQ(b.num_free + b.num_cached, b.num_blocks);
  }

  // The sequences live now, by id.
  std::vector<const Sequence*> LiveSequences() const {
    std::vector<const Sequence*> live;
    for (uint64_t id : ids_) {
      if (const Sequence* seq = scheduler_.FindSequence(id)) live.push_back(seq);
    }
    return live;
  }

  // A fingerprint of every plan so far (ids, positions, tokens, tables, copies).
  uint64_t plan_digest() const { return digest_; }
  Scheduler& scheduler() { return scheduler_; }
  FakeKvWorker& worker() { return worker_; }
  std::map<uint64_t, std::vector<int32_t>>& outputs() { return outputs_; }
  std::map<uint64_t, SequenceEvent>& finished() { return finished_; }
  // The events that carried prompt logprobs, by sequence.
  std::map<uint64_t, std::vector<SequenceEvent>>& prompt_logprobs() { return prompt_logprobs_; }

 private:
  Scheduler scheduler_;
  FakeKvWorker worker_;
  SchedulerConfig config_;
  double now_ = 0;
  std::map<uint64_t, ScheduleRequest> requests_;
  std::set<uint64_t> ids_;
  std::map<uint64_t, std::vector<int32_t>> outputs_;
  std::map<uint64_t, SequenceEvent> finished_;
  std::map<uint64_t, std::vector<SequenceEvent>> prompt_logprobs_;
  std::set<uint64_t> last_running_, last_waiting_;
  int32_t last_used_ = 0;
  uint64_t digest_ = 0xcbf29ce484222325ull;

  void Mix(uint64_t v) { digest_ = (digest_ ^ v) * 0x100000001b3ull; }
  void Digest(const StepPlan& plan) {
    Mix(plan.step_id);
    for (const auto& [src, dst] : plan.block_copies) Mix(static_cast<uint64_t>(src) << 32 | static_cast<uint32_t>(dst));
    for (const SequencePlan& sp : plan.sequences) {
      Mix(sp.seq_id);
      Mix(static_cast<uint64_t>(sp.num_cached));
      Mix(sp.needs_token);
      Mix(sp.prompt_logprobs);
      Mix(static_cast<uint32_t>(sp.next_prompt_token));
      Mix(static_cast<uint32_t>(sp.num_draft_tokens));
      for (int32_t t : sp.token_ids) Mix(static_cast<uint32_t>(t));
      for (int32_t b : sp.block_table) Mix(static_cast<uint32_t>(b));
    }
  }
};

inline SchedulerConfig Config(int32_t budget, int32_t max_num_seqs = 8) {
  SchedulerConfig c;
  c.max_num_batched_tokens = budget;
  c.max_num_seqs = max_num_seqs;
  c.max_queue = 64;
  c.max_model_len = 256;
  c.enable_prefix_caching = false;
  return c;
}

}  // namespace tpserve::testing_coordinator
