#include "coordinator/scheduler.h"

#include <algorithm>
#include <chrono>
#include <string>
#include <unordered_set>

#include "common/check.h"

namespace tpserve {
namespace {

double SteadySeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

int32_t CeilDiv(int64_t a, int64_t b) { return static_cast<int32_t>((a + b - 1) / b); }

void Erase(std::vector<Sequence*>& queue, const Sequence* seq) {
  auto it = std::find(queue.begin(), queue.end(), seq);
  CHECK(it != queue.end()) << "seq " << seq->seq_id << " not queued";
  queue.erase(it);
}

}  // namespace

SampleUsage UsageOf(const Sequence& seq) {
  SampleUsage u;
  u.num_prompt_tokens = seq.num_prompt_tokens();
  u.num_output_tokens = seq.num_output_tokens();
  u.num_cached_prompt_tokens = seq.num_cached_prompt_tokens;
  u.ttft_s = seq.ttft_s();
  u.tpot_s = seq.tpot_s();
  u.num_draft_tokens = seq.speculation.num_draft_tokens;
  u.num_accepted_tokens = seq.speculation.num_accepted_tokens;
  return u;
}

Scheduler::Scheduler(const SchedulerConfig& config, int32_t num_blocks, int32_t block_size, KvGroups kv_groups)
    : config_(config),
      block_manager_(num_blocks, block_size, config.enable_prefix_caching, std::move(kv_groups)),
      clock_(SteadySeconds) {
  CHECK_GT(config.max_num_seqs, 0);
  CHECK_GT(config.max_num_batched_tokens, 0);
  CHECK_GE(config.max_queue, 0);
  CHECK_GT(config.max_model_len, 0);
  CHECK_GE(config.prefill_chunk, 0);
}

Scheduler::~Scheduler() = default;

void Scheduler::SetClock(std::function<double()> clock) { clock_ = std::move(clock); }

double Scheduler::Now() const { return clock_(); }

bool Scheduler::Before(const Sequence& a, const Sequence& b) const {
  if (config_.enable_priority && a.priority != b.priority) return a.priority < b.priority;
  if (a.arrival_order != b.arrival_order) return a.arrival_order < b.arrival_order;
  return a.sample_index < b.sample_index;
}

void Scheduler::InsertOrdered(std::vector<Sequence*>& queue, Sequence* seq) const {
  auto it = std::upper_bound(queue.begin(), queue.end(), seq,
                             [this](const Sequence* a, const Sequence* b) { return Before(*a, *b); });
  queue.insert(it, seq);
}

int32_t Scheduler::num_waiting() const {
  int32_t n = static_cast<int32_t>(waiting_.size());
  for (const auto& [request_id, children] : pending_forks_) n += static_cast<int32_t>(children.size());
  return n;
}

int32_t Scheduler::num_running() const { return static_cast<int32_t>(running_.size()); }

const Sequence* Scheduler::FindSequence(uint64_t seq_id) const {
  auto it = live_.find(seq_id);
  return it == live_.end() ? nullptr : it->second.get();
}

Status Scheduler::CheckFits(int64_t num_prompt, int32_t max_tokens) const {
  const int64_t total = num_prompt + max_tokens;
  if (total > config_.max_model_len) {
    return OutOfRange("prompt (" + std::to_string(num_prompt) + " tokens) + max_tokens (" +
                      std::to_string(max_tokens) + ") exceeds the context of " +
                      std::to_string(config_.max_model_len) + " tokens");
  }
  // The last sampled token is never fed back, so it needs no KV slot.
  const int64_t pages_needed = block_manager_.groups().MaxPagesHeld(total - 1, config_.max_num_batched_tokens,
                                                                    block_manager_.block_size());
  if (pages_needed > block_manager_.num_blocks()) {
    return OutOfRange("prompt + max_tokens needs " + std::to_string(pages_needed) +
                      " KV blocks, the cache has " + std::to_string(block_manager_.num_blocks()));
  }
  if (!config_.enable_chunked_prefill && num_prompt > config_.max_num_batched_tokens) {
    return OutOfRange("prompt of " + std::to_string(num_prompt) + " tokens exceeds the step budget of " +
                      std::to_string(config_.max_num_batched_tokens) + " (chunked prefill is off)");
  }
  return OkStatus();
}

Status Scheduler::Add(ScheduleRequest request) {
  const int64_t num_prompt = static_cast<int64_t>(request.prompt_ids.size());
  const int32_t n = request.num_samples;
  if (num_prompt == 0) return InvalidArgument("empty prompt");
  if (request.stopping.max_tokens <= 0) {
    return InvalidArgument("max_tokens must be positive, got " + std::to_string(request.stopping.max_tokens));
  }
  if (n < 1 || n > kMaxSamplesPerRequest || n > config_.max_num_seqs) {
    return InvalidArgument("n must be in [1, " +
                           std::to_string(std::min(kMaxSamplesPerRequest, config_.max_num_seqs)) +
                           "], got " + std::to_string(n));
  }
  if (request.request_id > kMaxRequestId) return InvalidArgument("request id too large");
  RETURN_IF_ERROR(ValidateSpeculativeConfig(request.speculative));
  if (request.speculative.enabled() && request.speculative.method == SpeculativeMethod::kDraft &&
      !config_.has_draft_model) {
    return InvalidArgument("speculative method draft needs a worker group started with a draft model "
                           "(tpserve serve --draft-model FILE)");
  }
  if (request.beam.enabled()) RETURN_IF_ERROR(CheckBeamRequest(request));
  const uint64_t first_id = SequenceIdOf(request.request_id, 0);
  auto live_it = live_.lower_bound(first_id);
  if (live_it != live_.end() && live_it->first < first_id + kMaxSamplesPerRequest) {
    return InvalidArgument("request id " + std::to_string(request.request_id) + " is already live");
  }
  RETURN_IF_ERROR(CheckFits(num_prompt, request.stopping.max_tokens));
  if (num_waiting() + n > config_.max_queue) {
    return ResourceExhausted("overloaded: " + std::to_string(num_waiting()) +
                             " sequences already waiting (limit " + std::to_string(config_.max_queue) + ")");
  }
  if (config_.max_queued_tokens > 0) {
    int64_t queued = 0;  // tokens the waiting sequences still need prefilled (forks share their parent's)
    for (const Sequence* seq : waiting_) queued += seq->num_uncomputed();
    if (queued + num_prompt > config_.max_queued_tokens) {
      return ResourceExhausted("overloaded: " + std::to_string(queued) + " prompt tokens already waiting (limit " +
                               std::to_string(config_.max_queued_tokens) + ")");
    }
  }

  const uint64_t arrival = next_arrival_++;
  const double arrival_time = request.arrival_time_s < 0 ? Now() : request.arrival_time_s;
  // Sample 0 prefills the shared prompt; the others fork from it at its last prompt token. A
  // one-token prompt has nothing to share, so its samples start on their own. A beam search starts
  // as one beam, which its steps fork.
  const bool beam = request.beam.enabled();
  const bool fork = n > 1 && num_prompt > 1 && !beam;
  for (int32_t i = 0; i < (beam ? 1 : n); ++i) {
    auto seq = std::make_unique<Sequence>();
    seq->seq_id = SequenceIdOf(request.request_id, i);
    seq->request_id = request.request_id;
    seq->sample_index = i;
    seq->prompt_ids = request.prompt_ids;
    seq->sampling = request.sampling;
    seq->sampling.seed = SampleSeed(request.sampling.seed, i);
    seq->stopping = request.stopping;
    seq->priority = request.priority;
    seq->arrival_order = arrival;
    seq->arrival_time_s = arrival_time;
    seq->wants_prompt_logprobs = request.prompt_logprobs;
    seq->speculative = request.speculative;
    seq->speculation.k = request.speculative.enabled() ? request.speculative.num_tokens : 0;
    if (beam) seq->sampling.num_logprobs = 2 * request.beam.width;
    Sequence* raw = seq.get();
    live_.emplace(raw->seq_id, std::move(seq));
    if (fork && i > 0) {
      pending_forks_[request.request_id].push_back(raw);
    } else {
      InsertOrdered(waiting_, raw);
    }
  }
  if (beam) {
    const int32_t max_output = std::min<int64_t>(request.stopping.max_tokens, config_.max_model_len - num_prompt);
    beams_[request.request_id] =
        std::make_unique<BeamRequestState>(BeamRequestState{BeamSearch(request.beam, max_output), n});
  }
  return OkStatus();
}

std::vector<Sequence*> Scheduler::LiveSamples(uint64_t request_id) const {
  std::vector<Sequence*> samples;
  const uint64_t first = SequenceIdOf(request_id, 0);
  for (auto it = live_.lower_bound(first); it != live_.end() && it->first < first + kMaxSamplesPerRequest; ++it) {
    samples.push_back(it->second.get());
  }
  return samples;
}

bool Scheduler::HasPendingChildren(const Sequence& seq) const {
  auto it = pending_forks_.find(seq.request_id);
  if (it == pending_forks_.end()) return false;
  return std::find(it->second.begin(), it->second.end(), &seq) == it->second.end();
}

int32_t Scheduler::NumRunningOrForking() const {
  int32_t n = num_running();
  for (const auto& [request_id, children] : pending_forks_) {
    for (const Sequence* seq : LiveSamples(request_id)) {
      if (seq->status == SequenceStatus::kRunning && HasPendingChildren(*seq)) {
        n += static_cast<int32_t>(children.size());
        break;
      }
    }
  }
  return n;
}

int32_t Scheduler::PrefillTarget(const Sequence& seq) const {
  // A request's leader stops before its last prompt token, where its samples fork.
  return HasPendingChildren(seq) ? seq.num_prompt_tokens() - 1 : seq.num_tokens();
}

int32_t Scheduler::ChunkLimit(int32_t budget) const {
  return config_.prefill_chunk > 0 ? std::min(budget, config_.prefill_chunk) : budget;
}

void Scheduler::Preempt(Sequence* seq) {
  CHECK(seq->status == SequenceStatus::kRunning) << "seq " << seq->seq_id;
  block_manager_.Free(*seq);
  Erase(running_, seq);
  // It re-prefills from position 0 (no cached prefix while it needs prompt logprobs): scored again.
  if (seq->needs_prompt_logprobs()) seq->prompt_logprobs.clear();
  seq->num_draft_computed = 0;
  seq->status = SequenceStatus::kWaiting;
  ++seq->num_preemptions;
  ++num_preemptions_;
  InsertOrdered(waiting_, seq);
}

void Scheduler::ForkChildren(Sequence* leader) {
  auto it = pending_forks_.find(leader->request_id);
  CHECK(it != pending_forks_.end());
  std::vector<Sequence*> children = std::move(it->second);
  pending_forks_.erase(it);
  for (Sequence* child : children) {
    block_manager_.Fork(*leader, *child);
    child->prompt_logprobs = leader->prompt_logprobs;  // the leader scored the prompt up to the fork
    child->num_draft_computed = std::min(leader->num_draft_computed, child->num_computed);  // shared pages
    child->status = SequenceStatus::kRunning;
    InsertOrdered(running_, child);
  }
}

StepPlan Scheduler::Schedule() {
  CHECK(!in_flight_) << "Schedule() with step " << in_flight_step_id_ << " still in flight";
  int32_t budget = config_.max_num_batched_tokens;
  auto is_decode = [this](const Sequence* s) { return PrefillTarget(*s) - s->num_computed == 1; };
  const int32_t num_decodes = static_cast<int32_t>(std::count_if(running_.begin(), running_.end(), is_decode));
  min_acceptance_ = step_cost_.BreakEvenAcceptance(num_decodes, SpeculationState::kMinAcceptance);
  // Until the step cost at this batch is known, one step in kExploreInterval proposes nothing: decode
  // steps that all propose alike have one size, from which a per-position cost cannot be told.
  exploring_ = !step_cost_.Fit(num_decodes).has_value() && num_steps_ % kExploreInterval == kExploreInterval - 1;
  struct Scheduled {
    Sequence* seq;
    int32_t num_tokens;           // its own new tokens
    std::vector<int32_t> drafts;  // speculative proposals after them
  };
  std::vector<Scheduled> scheduled;  // plan order
  std::unordered_set<const Sequence*> is_scheduled;
  bool preempted = false;

  // Gives a running sequence its next tokens (a decode token or a prefill chunk), preempting
  // the latest running sequences not yet scheduled when blocks run out. False if it was
  // preempted itself.
  auto schedule_running = [&](Sequence* seq) {
    const int32_t wanted = std::min(PrefillTarget(*seq) - seq->num_computed, ChunkLimit(budget));
    CHECK_GT(wanted, 0) << "seq " << seq->seq_id;
    std::vector<int32_t> proposed = Drafts(*seq, budget - wanted);
    int32_t n = 0;
    while ((n = std::min(wanted, block_manager_.MaxAppendableTokens(*seq))) == 0) {
      // A parked beam first (it has nothing to run until its siblings have), else the latest not scheduled.
      Sequence* victim = LastParkedBeam();
      for (auto it = running_.rbegin(); victim == nullptr && it != running_.rend(); ++it) {
        if (!is_scheduled.count(*it)) victim = *it;
      }
      CHECK(victim != nullptr);
      Preempt(victim);
      preempted = true;
      if (victim == seq) return false;
    }
    // Proposals take only the slots that are free now.
    const int32_t lookahead = static_cast<int32_t>(proposed.size());
    proposed.resize(std::clamp(block_manager_.MaxAppendableTokens(*seq, lookahead) - n, 0, lookahead));
    block_manager_.Append(*seq, n + static_cast<int32_t>(proposed.size()), lookahead);
    is_scheduled.insert(seq);
    budget -= n + static_cast<int32_t>(proposed.size());
    scheduled.push_back({seq, n, std::move(proposed)});
    return true;
  };

  // 1-2. Running sequences: decodes (one token left) first, then partial prefills.
  std::vector<Sequence*> order;
  for (Sequence* seq : running_) {
    if (PrefillTarget(*seq) - seq->num_computed == 1) order.push_back(seq);
  }
  for (Sequence* seq : running_) {
    if (PrefillTarget(*seq) - seq->num_computed > 1) order.push_back(seq);
  }
  for (Sequence* seq : order) {
    if (budget == 0) break;
    if (seq->status != SequenceStatus::kRunning) continue;  // preempted for an earlier one
    schedule_running(seq);
  }

  // 3. Waiting sequences in order, unless this step had to preempt (their blocks are the ones
  // just freed; taking them back now would thrash).
  // A beam preempted while parked waits for its siblings, not for admission.
  auto next_waiting = [this] {
    return std::find_if(waiting_.begin(), waiting_.end(), [](const Sequence* s) { return !s->beam_parked; });
  };
  for (auto next = next_waiting(); !preempted && budget > 0 && next != waiting_.end(); next = next_waiting()) {
    Sequence* seq = *next;
    if (NumRunningOrForking() + SeatsOnAdmission(*seq) > config_.max_num_seqs) break;
    const int32_t cached = block_manager_.NumCachedPrefixTokens(*seq);
    const int32_t remaining = PrefillTarget(*seq) - cached;
    CHECK_GE(remaining, 0);
    int32_t n = std::min(remaining, ChunkLimit(budget));
    // Without chunked prefill a prompt goes whole; only one longer than any budget is split.
    if (!config_.enable_chunked_prefill && n < remaining &&
        remaining <= config_.max_num_batched_tokens) {
      break;
    }
    // Admitted only when its whole chunk fits: a prompt that starts on the last free blocks would
    // soon preempt itself or others. Parked beams have nothing to run: they make room first.
    if (!block_manager_.CanAllocate(*seq, n)) {
      Sequence* parked = LastParkedBeam();
      if (parked == nullptr) break;
      Preempt(parked);
      continue;
    }
    block_manager_.Allocate(*seq, n);
    if (seq->num_preemptions == 0) {
      seq->num_cached_prompt_tokens = std::min(seq->num_computed, seq->num_prompt_tokens());
    }
    waiting_.erase(next);
    seq->status = SequenceStatus::kRunning;
    InsertOrdered(running_, seq);
    if (n > 0) {
      scheduled.push_back({seq, n, {}});
      is_scheduled.insert(seq);
      budget -= n;
    } else {
      // The cache held the prompt up to the fork point: fork now, and each sample computes the
      // last prompt token as soon as budget and blocks allow.
      ForkChildren(seq);
      for (Sequence* sample : std::vector<Sequence*>(running_)) {
        if (sample->request_id != seq->request_id || is_scheduled.count(sample) || budget == 0) continue;
        if (block_manager_.MaxAppendableTokens(*sample) < 1) continue;
        block_manager_.Append(*sample, 1);
        scheduled.push_back({sample, 1, {}});
        is_scheduled.insert(sample);
        budget -= 1;
      }
    }
  }

  StepPlan plan;
  if (scheduled.empty()) {
    CHECK(block_manager_.TakeBlockCopies().empty());
    return plan;
  }
  plan.step_id = next_step_id_++;
  plan.block_copies = block_manager_.TakeBlockCopies();
  in_flight_plan_.clear();
  for (auto& [seq, n, proposed] : scheduled) {
    const int32_t num_proposed = static_cast<int32_t>(proposed.size());
    plan.sequences.push_back(MakePlan(*seq, n, proposed));
    in_flight_plan_.push_back(
        {seq->seq_id, n, plan.sequences.back().needs_token, std::move(proposed), plan.sequences.back().draft_model});
    num_scheduled_tokens_ += n + num_proposed;
    if (n == 1 && seq->num_output_tokens() > 0 && seq->num_computed + n == seq->num_tokens()) {
      num_decode_tokens_ += n + num_proposed;
    } else {
      num_prefill_tokens_ += n + num_proposed;
    }
  }
  ++num_steps_;
  in_flight_ = true;
  in_flight_step_id_ = plan.step_id;
  return plan;
}

SequencePlan Scheduler::MakePlan(const Sequence& seq, int32_t num_new_tokens, const std::vector<int32_t>& drafts) const {
  SequencePlan p;
  p.seq_id = seq.seq_id;
  p.num_cached = seq.num_computed;
  const int32_t num_drafts = static_cast<int32_t>(drafts.size());
  p.token_ids.reserve(num_new_tokens + num_drafts);
  for (int32_t i = 0; i < num_new_tokens; ++i) p.token_ids.push_back(seq.token_at(seq.num_computed + i));
  if (UsesDraftModel(seq) && (num_drafts > 0 || (num_new_tokens > 1 && min_acceptance_ < 1))) {
    // The worker's draft model proposes them; it first reads what it has not seen of the sequence. It
    // reads prefill chunks as they come (a prompt is cheaper read in its prefill than in a decode
    // step), unless no proposal pays at this batch, and skips plain decodes (catching up on them when
    // it next proposes).
    p.draft_model = true;
    for (int32_t i = seq.num_draft_computed; i < seq.num_computed; ++i) p.draft_catch_up.push_back(seq.token_at(i));
    p.num_proposals = num_drafts;
  } else {
    p.token_ids.insert(p.token_ids.end(), drafts.begin(), drafts.end());
    p.num_draft_tokens = num_drafts;
  }
  p.block_table = seq.block_table;
  CHECK_EQ(block_manager_.NumLogicalBlocks(seq),
           CeilDiv(seq.num_computed + num_new_tokens + num_drafts, block_manager_.block_size()));
  p.needs_token = seq.num_computed + num_new_tokens == seq.num_tokens();
  CHECK(p.needs_token || num_drafts == 0) << "seq " << seq.seq_id;
  p.sampling = seq.sampling;
  p.sample_index = static_cast<uint32_t>(seq.num_output_tokens());
  if (p.needs_token && seq.sampling.has_penalties()) p.penalty_tokens = seq.AllTokens();
  // Position i predicts token i + 1: this chunk scores the prompt tokens up to position P - 2.
  const int32_t end = seq.num_computed + num_new_tokens;
  if (seq.needs_prompt_logprobs() && seq.num_computed <= seq.num_prompt_tokens() - 2) {
    CHECK_EQ(static_cast<int32_t>(seq.prompt_logprobs.size()), seq.num_computed) << "seq " << seq.seq_id;
    p.prompt_logprobs = true;
    p.next_prompt_token = end < seq.num_prompt_tokens() ? seq.prompt_ids[end] : -1;
  }
  return p;
}

bool Scheduler::StopsAfter(const Sequence& seq, int32_t token) const {
  if (!seq.stopping.ignore_eos && seq.stopping.eos_token_id >= 0 && token == seq.stopping.eos_token_id) {
    return true;
  }
  const auto& stops = seq.stopping.stop_token_ids;
  return std::find(stops.begin(), stops.end(), token) != stops.end();
}

StatusOr<std::vector<SequenceEvent>> Scheduler::Postprocess(const StepPlan& plan, const StepResult& result) {
  std::vector<SequenceEvent> events;
  if (plan.sequences.empty()) return events;
  if (!in_flight_ || plan.step_id != in_flight_step_id_) {
    return InvalidArgument("step " + std::to_string(plan.step_id) + " is not the step in flight");
  }
  if (result.step_id != plan.step_id) {
    return InvalidArgument("result of step " + std::to_string(result.step_id) + " for step " +
                           std::to_string(plan.step_id));
  }
  if (plan.sequences.size() != in_flight_plan_.size()) return InvalidArgument("plan differs from the one scheduled");
  RETURN_IF_ERROR(TakeProposals(result));
  size_t num_needing = 0;
  for (size_t i = 0; i < plan.sequences.size(); ++i) {
    if (plan.sequences[i].seq_id != in_flight_plan_[i].seq_id) return InvalidArgument("plan differs from the one scheduled");
    if (!in_flight_plan_[i].needs_token) continue;
    for (size_t row = 0; row <= in_flight_plan_[i].drafts.size(); ++row, ++num_needing) {
      if (num_needing >= result.sequences.size() ||
          result.sequences[num_needing].seq_id != in_flight_plan_[i].seq_id) {
        return InvalidArgument("step " + std::to_string(plan.step_id) + " result lacks token " +
                               std::to_string(row) + " of seq " + std::to_string(in_flight_plan_[i].seq_id));
      }
    }
  }
  if (num_needing != result.sequences.size()) {
    return InvalidArgument("step " + std::to_string(plan.step_id) + " result has " +
                           std::to_string(result.sequences.size()) + " tokens, expected " +
                           std::to_string(num_needing));
  }
  RETURN_IF_ERROR(CheckPromptLogprobs(plan, result));
  // The cost of steady decode steps only (what a proposal adds to): a prefill chunk's tokens, and a draft
  // model's catch-up on a prompt, cost another rate.
  const bool decodes_only = std::all_of(plan.sequences.begin(), plan.sequences.end(), [](const SequencePlan& seq) {
    return seq.token_ids.size() - seq.num_draft_tokens == 1 && seq.draft_catch_up.size() <= 1;
  });
  if (decodes_only && result.compute_ms > 0) {  // fakes report no time
    int64_t num_positions = 0;
    for (const InFlightSequence& planned : in_flight_plan_) num_positions += planned.num_tokens + planned.drafts.size();
    step_cost_.Observe(static_cast<int32_t>(in_flight_plan_.size()), num_positions, result.compute_ms);
  }

  in_flight_ = false;
  const double now = Now();
  std::vector<uint64_t> beam_requests;  // with a beam parked in this step, in plan order
  size_t r = 0;
  size_t scored = 0;
  for (size_t i = 0; i < in_flight_plan_.size(); ++i) {
    const InFlightSequence& planned = in_flight_plan_[i];
    const SequenceResult* sampled = planned.needs_token ? &result.sequences[r] : nullptr;
    if (planned.needs_token) r += 1 + planned.drafts.size();
    const PromptLogprobsResult* prompt =
        plan.sequences[i].prompt_logprobs ? &result.prompt_logprobs[scored++] : nullptr;
    auto it = live_.find(planned.seq_id);
    // Aborted while the step ran (and perhaps its request id reused since): nothing to apply.
    if (it == live_.end() || it->second->status != SequenceStatus::kRunning) continue;
    Sequence* seq = it->second.get();
    if (prompt != nullptr) {
      CHECK_EQ(static_cast<int32_t>(seq->prompt_logprobs.size()), seq->num_computed) << "seq " << seq->seq_id;
      seq->prompt_logprobs.insert(seq->prompt_logprobs.end(), prompt->positions.begin(), prompt->positions.end());
    }
    // The draft model holds the K/V of what it read: the step's tokens, and of the proposals all but the
    // last, as far as they were kept.
    const int32_t draft_end = seq->num_computed + planned.num_tokens +
                              std::max(0, static_cast<int32_t>(planned.drafts.size()) - 1);
    if (sampled == nullptr) {
      seq->num_computed += planned.num_tokens;
      if (planned.draft_model) seq->num_draft_computed = seq->num_computed;
      block_manager_.MarkComputed(*seq);
      if (HasPendingChildren(*seq) && seq->num_computed == PrefillTarget(*seq)) ForkChildren(seq);
      continue;
    }
    if (IsBeam(*seq)) {
      for (SequenceEvent& event : ParkBeam(seq, planned.num_tokens, *sampled)) events.push_back(std::move(event));
      if (std::find(beam_requests.begin(), beam_requests.end(), seq->request_id) == beam_requests.end()) {
        beam_requests.push_back(seq->request_id);
      }
      continue;
    }
    std::vector<SequenceEvent> applied = ApplySampled(seq, planned.num_tokens, planned.drafts, sampled, now);
    if (planned.draft_model) seq->num_draft_computed = std::min(seq->num_computed, draft_end);
    // A draft model that drew none of the proposals asked for leaves the reserved slots unused.
    if (planned.draft_model && planned.drafts.empty() && !seq->is_finished()) block_manager_.DropLookahead(*seq);
    if (seq->is_finished()) live_.erase(it);
    for (SequenceEvent& event : applied) events.push_back(std::move(event));
  }
  for (uint64_t request_id : beam_requests) {
    for (SequenceEvent& event : StepBeams(request_id, now)) events.push_back(std::move(event));
  }
  in_flight_plan_.clear();
  return events;
}

Status Scheduler::CheckPromptLogprobs(const StepPlan& plan, const StepResult& result) {
  size_t scored = 0;
  for (const SequencePlan& seq : plan.sequences) {
    if (!seq.prompt_logprobs) continue;
    const std::string where = "step " + std::to_string(plan.step_id) + " prompt logprobs of seq " +
                              std::to_string(seq.seq_id) + ": ";
    if (scored >= result.prompt_logprobs.size() || result.prompt_logprobs[scored].seq_id != seq.seq_id) {
      return InvalidArgument(where + "missing");
    }
    const std::vector<PromptTokenLogprob>& positions = result.prompt_logprobs[scored++].positions;
    if (static_cast<int32_t>(positions.size()) != seq.num_prompt_logprobs()) {
      return InvalidArgument(where + std::to_string(positions.size()) + " positions, expected " +
                             std::to_string(seq.num_prompt_logprobs()));
    }
    for (size_t j = 0; j < positions.size(); ++j) {
      const int32_t expected = j + 1 < seq.token_ids.size() ? seq.token_ids[j + 1] : seq.next_prompt_token;
      if (positions[j].token_id != expected) {
        return InvalidArgument(where + "position " + std::to_string(seq.num_cached + j) + " scored token " +
                               std::to_string(positions[j].token_id) + ", the prompt has " +
                               std::to_string(expected));
      }
    }
  }
  if (scored != result.prompt_logprobs.size()) return InvalidArgument("step result has unasked prompt logprobs");
  return OkStatus();
}

void Scheduler::Finish(Sequence* seq, FinishReason reason) {
  CHECK(seq->status != SequenceStatus::kFinished) << "seq " << seq->seq_id << " finished twice";
  auto pending = pending_forks_.find(seq->request_id);
  const bool is_pending_child =
      pending != pending_forks_.end() &&
      std::find(pending->second.begin(), pending->second.end(), seq) != pending->second.end();
  if (is_pending_child) {
    Erase(pending->second, seq);
    if (pending->second.empty()) pending_forks_.erase(pending);
  } else {
    if (seq->status == SequenceStatus::kRunning) {
      block_manager_.Free(*seq);
      Erase(running_, seq);
    } else {
      Erase(waiting_, seq);
    }
    // A leader leaving before its samples forked hands the prompt to the next sample.
    if (pending != pending_forks_.end()) {
      Sequence* next = pending->second.front();
      pending->second.erase(pending->second.begin());
      if (pending->second.empty()) pending_forks_.erase(pending);
      InsertOrdered(waiting_, next);
    }
  }
  seq->status = SequenceStatus::kFinished;
  seq->finish_reason = reason;
  seq->finish_time_s = Now();
}

Status Scheduler::Abort(uint64_t seq_id, FinishReason reason) {
  auto it = live_.find(seq_id);
  if (it == live_.end()) return NotFound("no live sequence " + std::to_string(seq_id));
  const uint64_t request_id = it->second->request_id;
  Finish(it->second.get(), reason);
  live_.erase(it);
  if (beams_.count(request_id) && LiveSamples(request_id).empty()) beams_.erase(request_id);
  return OkStatus();
}

Status Scheduler::AbortRequest(uint64_t request_id, FinishReason reason) {
  if (request_id > kMaxRequestId) return NotFound("no live request " + std::to_string(request_id));
  std::vector<uint64_t> ids;
  for (const Sequence* seq : LiveSamples(request_id)) ids.push_back(seq->seq_id);
  if (ids.empty()) return NotFound("no live request " + std::to_string(request_id));
  // Last sample first, so no leader hands its prompt to a sample about to go too.
  for (auto it = ids.rbegin(); it != ids.rend(); ++it) RETURN_IF_ERROR(Abort(*it, reason));
  return OkStatus();
}

SchedulerStats Scheduler::Stats() const {
  SchedulerStats stats;
  stats.num_waiting = num_waiting();
  stats.num_running = num_running();
  stats.num_steps = num_steps_;
  stats.num_preemptions = num_preemptions_;
  stats.num_scheduled_tokens = num_scheduled_tokens_;
  stats.num_prefill_tokens = num_prefill_tokens_;
  stats.num_decode_tokens = num_decode_tokens_;
  stats.num_verify_steps = num_verify_steps_;
  stats.num_draft_tokens = num_draft_tokens_;
  stats.num_accepted_tokens = num_accepted_tokens_;
  stats.blocks = block_manager_.Stats();
  return stats;
}

}  // namespace tpserve
