// Scheduler: iteration-level (continuous batching) scheduling for one worker group.
//
// The engine loop reads as
//   StepPlan plan = scheduler.Schedule();
//   if (plan.sequences.empty()) wait for work;
//   StepResult result = group.Execute(plan);
//   ASSIGN_OR_RETURN(events, scheduler.Postprocess(plan, result));  stream events
//
// Schedule() builds one step under the token budget:
//   1. running sequences with one token left to compute (decodes), one token each, in
//      (priority,) arrival order; when KV blocks run out, the lowest-priority / latest-arrived
//      running sequence not yet scheduled this step is preempted by recompute (blocks freed, back
//      to waiting with its output kept; it later re-prefills prompt ++ output and continues with
//      the very same tokens, since sampling depends on (seed, sample_index, token id) only, and each sample has its own seed (SampleSeed));
//   2. running sequences part-way through their prefill, next chunk each;
//   3. waiting sequences in FCFS (or priority) order, chunked to what is left of the budget,
//      while blocks and max_num_seqs allow (none when step 1-2 had to preempt).
// Speculative decoding (ScheduleRequest::speculative): a decode may carry proposed tokens after its
// own (coordinator/speculation.h), on free blocks and budget only (never preempting for them); the
// worker samples after each, Postprocess keeps the proposals equal to the sampled tokens and the
// token after them, and gives back the slots of the rest, so the sequence's blocks, hashes and
// prefix cache are what plain decoding would have at the same tokens.
// n > 1 samples of a request: sample 0 prefills the prompt up to its last token, then the other
// samples fork from it (sharing every block) and each computes the last prompt token itself;
// the shared partial block is copied on write (StepPlan::block_copies).
//
// Exactly one plan may be in flight: after Schedule(), call Postprocess() with its result (or
// DiscardInFlight()) before the next Schedule(). Everything is deterministic given the same calls.
// Not thread-safe: the engine loop owns it.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "comm/step_plan.h"
#include "common/status.h"
#include "coordinator/beam_search.h"
#include "coordinator/block_manager.h"
#include "coordinator/scheduler_config.h"
#include "coordinator/sequence.h"
#include "coordinator/step_cost.h"

namespace tpserve {

// One request as the server hands it over, already tokenized and validated for content.
struct ScheduleRequest {
  uint64_t request_id = 0;          // unique among live requests; <= kMaxRequestId
  std::vector<int32_t> prompt_ids;  // [P], P >= 1
  SamplingParams sampling;
  StoppingCriteria stopping;
  int32_t num_samples = 1;          // n, 1..kMaxSamplesPerRequest; sample i gets SequenceIdOf(id, i)
  int32_t priority = 0;             // smaller first, when SchedulerConfig::enable_priority
  double arrival_time_s = -1;       // < 0: now (the Scheduler's clock)
  // Score every prompt token during prefill (SequencePlan::prompt_logprobs, top-n =
  // sampling.num_logprobs); the request's samples then read no cached prefix blocks.
  bool prompt_logprobs = false;
  // Speculative decoding of its decode steps (coordinator/speculation.h); off by default. The
  // tokens are the same either way.
  SpeculativeConfig speculative;
  // Beam search (coordinator/beam_search.h): num_samples is then the number of hypotheses returned
  // (at most the width). Requires greedy sampling without penalties or logit bias, no logprobs,
  // no prompt logprobs and no speculation: beams are ranked on the model's raw logprobs.
  BeamConfig beam;
};

// A sample's usage and timing, as of one of its tokens (its Finish reports them).
struct SampleUsage {
  int32_t num_prompt_tokens = 0;
  int32_t num_output_tokens = 0;
  int32_t num_cached_prompt_tokens = 0;
  double ttft_s = -1;
  double tpot_s = -1;
  // Speculative decoding over the sample's life.
  int64_t num_draft_tokens = 0;     // proposals verified
  int64_t num_accepted_tokens = 0;  // of those, kept as output
  // Beam search: the events of a request come when the search ends, all the tokens of each
  // returned hypothesis (sample_index = its rank, best first) in one step, each event with the
  // hypothesis's length-penalised score and cumulative logprob (0 for other requests).
  double beam_score = 0;
  double cumulative_logprob = 0;
};
// A sequence's usage now.
SampleUsage UsageOf(const Sequence& seq);

// What happened to one sequence in a step, for the server to stream.
struct SequenceEvent {
  uint64_t seq_id = 0;
  uint64_t request_id = 0;
  int32_t sample_index = 0;
  int32_t token_id = -1;  // the new token; -1 when none (finished on an error)
  float logprob = 0.0f;
  std::vector<TokenLogprob> top_logprobs;
  // On the event of a sample's first token when the request asked for prompt logprobs: the prompt
  // and the logprob of each of its tokens after the first (token i + 1 given tokens 0..i). Every
  // sample's first event carries them (they are the same); the server sends them once.
  bool has_prompt_logprobs = false;
  std::vector<int32_t> prompt_ids;                  // [P]
  std::vector<PromptTokenLogprob> prompt_logprobs;  // [P - 1]
  bool is_finished = false;
  FinishReason finish_reason = FinishReason::kNone;
  // Usage as of this event's token (a step that keeps several tokens has an event for each).
  SampleUsage usage;
};

// One beam search request's state in a Scheduler (handed over with it by ReleaseAll / Adopt).
struct BeamRequestState {
  BeamSearch search;
  int32_t num_results = 1;             // hypotheses returned
  int32_t num_cached_prompt_tokens = 0;  // of its first admission, for usage
  double first_step_time_s = -1;       // when its first beam step ran (its "first token")
  int32_t num_steps = 0;               // beam steps run
};

// One request's live sequences, handed from the scheduler of a lost worker group to another
// (Scheduler::ReleaseAll / Adopt): reset to waiting (no blocks, nothing computed), with their
// prompt, output so far and sampling state, so that the adopting group re-prefills prompt ++
// output and continues with the very tokens the lost group would have sampled.
struct ReleasedRequest {
  uint64_t request_id = 0;
  std::vector<std::unique_ptr<Sequence>> sequences;  // [live samples], by sample index
  bool has_pending_forks = false;  // samples 1.. still wait to fork from sample 0's prefill
  std::unique_ptr<BeamRequestState> beam;  // beam search requests: the search so far
};

struct SchedulerStats {
  int32_t num_waiting = 0;
  int32_t num_running = 0;
  int64_t num_steps = 0;
  int64_t num_preemptions = 0;
  int64_t num_scheduled_tokens = 0;  // over all steps
  int64_t num_prefill_tokens = 0;
  int64_t num_decode_tokens = 0;  // including the proposals verified
  int64_t num_verify_steps = 0;   // sequence-steps that verified at least one proposal
  int64_t num_draft_tokens = 0;   // proposals verified
  int64_t num_accepted_tokens = 0;  // of those, kept as output
  BlockStats blocks;
};

class Scheduler {
 public:
  // num_blocks: KV pages (one per layer group per logical block: kvstore/kv_groups.h).
  // REQUIRES: config values positive (prefill_chunk >= 0), num_blocks > 0, block_size > 0.
  Scheduler(const SchedulerConfig& config, int32_t num_blocks, int32_t block_size, KvGroups kv_groups = {});
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Seconds, monotonic; used only for timing fields, never for decisions. Default: steady clock.
  void SetClock(std::function<double()> clock);

  // Queues a request's samples (sequences SequenceIdOf(request_id, 0..n-1)).
  // Errors: INVALID_ARGUMENT (empty prompt, max_tokens <= 0, n out of range, request id too big
  // or already live); OUT_OF_RANGE (prompt + max_tokens > max_model_len, or more blocks than the
  // cache holds, or a prompt over the budget with chunked prefill off); RESOURCE_EXHAUSTED
  // "overloaded" when the waiting queue cannot take n more sequences. Nothing is queued on error.
  Status Add(ScheduleRequest request);

  // Builds the next step (see the file comment). An empty plan means nothing can run now.
  // REQUIRES: no plan in flight.
  StepPlan Schedule();

  // Applies the result of the plan returned by the last Schedule(): advances num_computed, collects
  // prompt logprobs, appends sampled tokens, finishes sequences (EOS unless ignore_eos, stop token, max_tokens,
  // max_model_len) and frees their blocks. Returns one event per sampled token, in plan order
  // (sequences aborted since Schedule() are skipped). A result that does not match the plan
  // (step id, sequence ids or count, prompt logprobs' sequences, counts or token ids) is INVALID_ARGUMENT and changes nothing; the plan stays in
  // flight so the caller can DiscardInFlight(). REQUIRES: a plan in flight.
  StatusOr<std::vector<SequenceEvent>> Postprocess(const StepPlan& plan, const StepResult& result);

  // Forgets the in-flight plan (its step never ran, e.g. the group was lost): every sequence in it
  // is preempted (recompute). No-op when none is in flight.
  void DiscardInFlight();
  // The worker group's KV memory is gone: discards the in-flight plan, preempts every running
  // sequence and clears the prefix cache. Waiting sequences keep their order.
  void ResetKvCache();

  // The worker group is lost: hands over every live request (in request id order), leaving this
  // scheduler empty (its in-flight plan discarded, every block free).
  std::vector<ReleasedRequest> ReleaseAll();
  // Queues a request released by another scheduler, behind the requests already waiting.
  // OUT_OF_RANGE when it does not fit this group (CheckFits, as Add); INVALID_ARGUMENT when a
  // sequence is not in its released state or already live. Nothing is queued on error.
  Status Adopt(ReleasedRequest request);

  // Finishes one sequence now with `reason` (cancel, a stop string the server matched) and frees
  // its blocks. NOT_FOUND when it is not live.
  Status Abort(uint64_t seq_id, FinishReason reason = FinishReason::kCancelled);
  // Finishes every live sample of a request. NOT_FOUND when none is live.
  Status AbortRequest(uint64_t request_id, FinishReason reason = FinishReason::kCancelled);

  // The live sequence, or nullptr (finished sequences are dropped after their final event).
  const Sequence* FindSequence(uint64_t seq_id) const;
  int32_t num_waiting() const;  // including samples waiting for their fork
  int32_t num_running() const;
  bool has_unfinished() const { return !live_.empty(); }
  bool has_plan_in_flight() const { return in_flight_; }
  SchedulerStats Stats() const;
  const SchedulerConfig& config() const { return config_; }
  const BlockManager& block_manager() const { return block_manager_; }

 private:
  // A request of `num_prompt` tokens and up to `max_tokens` more fits this group: context, KV
  // blocks, and the step budget when chunked prefill is off. OUT_OF_RANGE otherwise.
  Status CheckFits(int64_t num_prompt, int32_t max_tokens) const;
  bool Before(const Sequence& a, const Sequence& b) const;
  void InsertOrdered(std::vector<Sequence*>& queue, Sequence* seq) const;
  void Preempt(Sequence* seq);
  void Finish(Sequence* seq, FinishReason reason);
  void ForkChildren(Sequence* leader);
  int32_t PrefillTarget(const Sequence& seq) const;
  int32_t ChunkLimit(int32_t budget) const;
  SequencePlan MakePlan(const Sequence& seq, int32_t num_new_tokens, const std::vector<int32_t>& drafts) const;
  // The proposals for seq's next step, at most max_drafts: none unless it speculates and the step
  // computes exactly its last token; never past max_tokens or the context. While its speculation
  // is paused (acceptance below min_acceptance_), none, and the first token it would have proposed
  // is kept as its shadow (a draft model's sequence probes with one now and then instead).
  // With a draft model the proposals are kProposalToCome placeholders, one per slot reserved.
  std::vector<int32_t> Drafts(Sequence& seq, int32_t max_drafts) const;
  static constexpr int32_t kProposalToCome = -1;
  // seq speculates with the group's draft model (its plans carry SequencePlan::draft_model).
  bool UsesDraftModel(const Sequence& seq) const;
  // Replaces the placeholders of the plan in flight by the draft model's proposals in `result`.
  // INVALID_ARGUMENT when the result's proposals do not answer the plan's.
  Status TakeProposals(const StepResult& result);
  // Applies the sampled rows of one sequence of the step (1 + drafts): appends the kept tokens,
  // advances num_computed, finishes it when a token ends it. Returns its events (one per token).
  std::vector<SequenceEvent> ApplySampled(Sequence* seq, int32_t num_tokens, const std::vector<int32_t>& drafts,
                                          const SequenceResult* rows, double now);
  bool StopsAfter(const Sequence& seq, int32_t token) const;
  // The request's live sequences, by sample index (slot).
  std::vector<Sequence*> LiveSamples(uint64_t request_id) const;
  // seq leads a request whose other samples wait to fork from it.
  bool HasPendingChildren(const Sequence& seq) const;
  // Running sequences plus the samples that will fork from running leaders: the seats taken.
  int32_t NumRunningOrForking() const;
  double Now() const;

  // Beam search (scheduler_beam.cc). INVALID_ARGUMENT when the request's settings exclude it.
  Status CheckBeamRequest(const ScheduleRequest& request) const;
  bool IsBeam(const Sequence& seq) const { return beams_.count(seq.request_id) > 0; }
  // The seats a waiting sequence takes when admitted: its forking samples or its beams too.
  int32_t SeatsOnAdmission(const Sequence& seq) const;
  // Holds a beam's candidates (its K/V of the step's tokens computed) until its siblings have theirs.
  // Returns an error event when the worker returned no candidates.
  std::vector<SequenceEvent> ParkBeam(Sequence* seq, int32_t num_tokens, const SequenceResult& sampled);
  // When every live beam of the request is parked: one step of its search (continuing, forking
  // and dropping beams), and when the search ends, the events of its best hypotheses.
  std::vector<SequenceEvent> StepBeams(uint64_t request_id, double now);
  std::vector<SequenceEvent> FinishBeams(uint64_t request_id, double now);
  // Ends every beam of the request without a result: one error event (the worker gave no candidates).
  std::vector<SequenceEvent> FailBeams(uint64_t request_id);
  // The running beam parked last in scheduling order (preempted to admit others), or nullptr.
  Sequence* LastParkedBeam() const;
  // Ends a sequence without an event (a pruned beam, or one of a finished search).
  void Drop(Sequence* seq);
  // A new beam at a free slot of parent's request sharing parent's blocks and tokens.
  Sequence* ForkBeam(const Sequence& parent);

  struct InFlightSequence {
    uint64_t seq_id;
    int32_t num_tokens;           // of its own, proposals not included
    bool needs_token;
    std::vector<int32_t> drafts;  // proposals after them
    bool draft_model;             // the group's draft model read its tokens (and made the proposals)
  };
  // The result's prompt logprobs match the plan's requests (sequences, counts, token ids).
  static Status CheckPromptLogprobs(const StepPlan& plan, const StepResult& result);

  const SchedulerConfig config_;
  BlockManager block_manager_;
  std::function<double()> clock_;
  std::map<uint64_t, std::unique_ptr<Sequence>> live_;  // by seq_id
  std::vector<Sequence*> waiting_;  // ordered by Before()
  std::vector<Sequence*> running_;  // ordered by Before()
  // Samples 1..n-1 of a request whose sample 0 has not reached the fork point yet, by leader id.
  std::map<uint64_t, std::vector<Sequence*>> pending_forks_;
  std::map<uint64_t, std::unique_ptr<BeamRequestState>> beams_;  // beam search requests, by request id
  uint64_t next_arrival_ = 0;
  uint64_t next_step_id_ = 1;
  bool in_flight_ = false;
  std::vector<InFlightSequence> in_flight_plan_;  // [sequences of the plan in flight]
  uint64_t in_flight_step_id_ = 0;
  int64_t num_steps_ = 0;
  int64_t num_preemptions_ = 0;
  int64_t num_scheduled_tokens_ = 0;
  int64_t num_prefill_tokens_ = 0;
  int64_t num_decode_tokens_ = 0;
  int64_t num_verify_steps_ = 0;
  int64_t num_draft_tokens_ = 0;
  int64_t num_accepted_tokens_ = 0;
  // The group's measured step cost, and the break-even acceptance of speculation at this step's
  // batch (Schedule sets it; Drafts reads it).
  StepCost step_cost_;
  double min_acceptance_ = SpeculationState::kMinAcceptance;
  static constexpr int64_t kExploreInterval = 4;
  bool exploring_ = false;  // this step proposes nothing (Schedule sets it)
};

}  // namespace tpserve
