// The Scheduler's beam search: the live hypotheses of a request are its sequences (slots 0..width-1),
// scheduled like any others and sharing KV blocks as forks do. A beam whose step ran parks with its
// candidates; when all are parked, BeamSearch::Step decides, and the beams it continues take their
// token (the first continuation of a beam keeps its sequence, each further one forks it, sharing
// every block with copy-on-write of the partial last one), the others are dropped in the same step.
// So the blocks in use are what the live hypotheses need. A parked beam may be preempted like any
// other; it keeps its candidates and recomputes its K/V when its continuation is admitted again.
#include <algorithm>
#include <string>

#include "common/check.h"
#include "coordinator/scheduler.h"

namespace tpserve {

Status Scheduler::CheckBeamRequest(const ScheduleRequest& request) const {
  const BeamConfig& beam = request.beam;
  RETURN_IF_ERROR(ValidateBeamConfig(beam));
  if (request.num_samples > beam.width) {
    return InvalidArgument("n = " + std::to_string(request.num_samples) + " exceeds the beam width " +
                           std::to_string(beam.width) + " (beam search returns at most width hypotheses)");
  }
  if (beam.width > config_.max_num_seqs) {
    return InvalidArgument("beam width " + std::to_string(beam.width) + " exceeds the server's max_num_seqs " +
                           std::to_string(config_.max_num_seqs));
  }
  const SamplingParams& s = request.sampling;
  if (!s.is_greedy() || s.has_penalties() || !s.logit_bias.empty() || s.num_logprobs > 0) {
    return InvalidArgument(
        "beam search ranks hypotheses on the model's raw logprobs: it takes temperature 0, no penalties, no "
        "logit_bias and no logprobs");
  }
  if (request.prompt_logprobs) return InvalidArgument("beam search does not return prompt logprobs");
  if (request.speculative.enabled()) return InvalidArgument("beam search does not speculate");
  return OkStatus();
}

int32_t Scheduler::SeatsOnAdmission(const Sequence& seq) const {
  if (HasPendingChildren(seq)) return 1 + static_cast<int32_t>(pending_forks_.at(seq.request_id).size());
  // A search's first beam soon becomes width of them.
  auto beam = beams_.find(seq.request_id);
  if (beam != beams_.end() && seq.num_output_tokens() == 0) return beam->second->search.config().width;
  return 1;
}

Sequence* Scheduler::LastParkedBeam() const {
  for (auto it = running_.rbegin(); it != running_.rend(); ++it) {
    if ((*it)->beam_parked) return *it;
  }
  return nullptr;
}

void Scheduler::Drop(Sequence* seq) {
  const uint64_t seq_id = seq->seq_id;
  Finish(seq, FinishReason::kCancelled);
  live_.erase(seq_id);
}

Sequence* Scheduler::ForkBeam(const Sequence& parent) {
  int32_t slot = 0;
  while (live_.count(SequenceIdOf(parent.request_id, slot))) ++slot;
  CHECK_LT(slot, kMaxSamplesPerRequest);
  auto child = std::make_unique<Sequence>(parent);
  child->seq_id = SequenceIdOf(parent.request_id, slot);
  child->sample_index = slot;
  child->block_table.clear();
  child->block_hashes.clear();
  child->num_computed = 0;
  Sequence* raw = child.get();
  live_.emplace(raw->seq_id, std::move(child));
  if (parent.status == SequenceStatus::kRunning) {
    block_manager_.Fork(parent, *raw);
    InsertOrdered(running_, raw);
  } else {  // preempted while parked: recomputes prompt ++ output, like its parent
    InsertOrdered(waiting_, raw);
  }
  return raw;
}

std::vector<SequenceEvent> Scheduler::ParkBeam(Sequence* seq, int32_t num_tokens, const SequenceResult& sampled) {
  seq->num_computed += num_tokens;
  block_manager_.MarkComputed(*seq);
  if (sampled.token_id < 0 || sampled.top_logprobs.empty()) return FailBeams(seq->request_id);
  seq->beam_candidates = sampled.top_logprobs;
  seq->beam_parked = true;
  return {};
}

std::vector<SequenceEvent> Scheduler::FailBeams(uint64_t request_id) {
  SequenceEvent event;  // the server fails all the request's samples
  event.seq_id = SequenceIdOf(request_id, 0);
  event.request_id = request_id;
  event.is_finished = true;
  event.finish_reason = FinishReason::kError;
  for (Sequence* beam : LiveSamples(request_id)) Drop(beam);
  beams_.erase(request_id);
  return {event};
}

std::vector<SequenceEvent> Scheduler::StepBeams(uint64_t request_id, double now) {
  auto state_it = beams_.find(request_id);
  if (state_it == beams_.end()) return {};  // failed in ParkBeam
  BeamRequestState& state = *state_it->second;
  const std::vector<Sequence*> live = LiveSamples(request_id);
  std::vector<BeamSearch::Beam> beams;
  for (Sequence* seq : live) {
    if (!seq->beam_parked) return {};  // a sibling has not run this step yet
    beams.push_back({seq->sample_index, &seq->output_ids, &seq->output_logprobs, seq->cumulative_logprob,
                     &seq->beam_candidates});
  }
  ++state.num_steps;
  if (state.first_step_time_s < 0) {
    state.first_step_time_s = now;
    state.num_cached_prompt_tokens = live[0]->num_cached_prompt_tokens;
  }
  const Sequence& any = *live[0];
  StatusOr<std::vector<BeamSearch::Continuation>> next =
      state.search.Step(beams, [&](int32_t token) { return StopsAfter(any, token); });
  if (!next.ok()) return FailBeams(request_id);
  if (state.search.done()) return FinishBeams(request_id, now);

  // Beams nothing continues go first (their blocks and slots free), then the forks, each from its
  // parent as it was, then the parents take their first continuation.
  std::vector<int32_t> num_children(live.size(), 0);
  for (const BeamSearch::Continuation& c : *next) ++num_children[c.parent];
  for (size_t b = 0; b < live.size(); ++b) {
    if (num_children[b] == 0) Drop(live[b]);
  }
  std::vector<bool> taken(live.size(), false);
  std::vector<std::pair<Sequence*, const BeamSearch::Continuation*>> extend;
  for (const BeamSearch::Continuation& c : *next) {
    Sequence* parent = live[c.parent];
    extend.emplace_back(taken[c.parent] ? ForkBeam(*parent) : parent, &c);
    taken[c.parent] = true;
  }
  for (auto& [seq, c] : extend) {
    seq->output_ids.push_back(c->token_id);
    seq->output_logprobs.push_back(c->logprob);
    seq->cumulative_logprob += static_cast<double>(c->logprob);
    seq->beam_parked = false;
    seq->beam_candidates.clear();
    if (seq->first_token_time_s < 0) seq->first_token_time_s = now;
    seq->last_token_time_s = now;
  }
  return {};
}

std::vector<SequenceEvent> Scheduler::FinishBeams(uint64_t request_id, double now) {
  auto state_it = beams_.find(request_id);
  const BeamRequestState& state = *state_it->second;
  const std::vector<Sequence*> live = LiveSamples(request_id);
  const Sequence& any = *live[0];
  const double ttft = state.first_step_time_s - any.arrival_time_s;
  std::vector<SequenceEvent> events;
  auto add_event = [&](int32_t rank) -> SequenceEvent& {
    SequenceEvent& event = events.emplace_back();
    event.seq_id = SequenceIdOf(request_id, rank);
    event.request_id = request_id;
    event.sample_index = rank;
    event.usage.num_prompt_tokens = any.num_prompt_tokens();
    return event;
  };
  const std::vector<BeamHypothesis> best = state.search.Best(state.num_results);
  for (int32_t rank = 0; rank < state.num_results; ++rank) {
    if (rank >= static_cast<int32_t>(best.size())) {
      // Fewer hypotheses than asked for (every candidate ended the sequence): an empty sample.
      SequenceEvent& event = add_event(rank);
      event.is_finished = true;
      event.finish_reason = FinishReason::kStop;
      continue;
    }
    const BeamHypothesis& h = best[rank];
    const int32_t length = static_cast<int32_t>(h.output_ids.size());
    for (int32_t j = 0; j < length; ++j) {
      SequenceEvent& event = add_event(rank);
      event.token_id = h.output_ids[j];
      event.logprob = h.output_logprobs[j];
      event.usage.num_output_tokens = j + 1;
      event.usage.num_cached_prompt_tokens = state.num_cached_prompt_tokens;
      event.usage.ttft_s = ttft;
      // Per step of the search (its tokens all reach the client at the end).
      event.usage.tpot_s = state.num_steps > 1 ? (now - state.first_step_time_s) / (state.num_steps - 1) : -1;
      event.usage.beam_score = h.score;  // on every event: a stop string may end the sample at any of them
      event.usage.cumulative_logprob = h.cumulative_logprob;
    }
    events.back().is_finished = true;
    events.back().finish_reason = h.ended ? FinishReason::kStop : FinishReason::kLength;
  }
  for (Sequence* seq : live) Drop(seq);
  beams_.erase(state_it);
  return events;
}

}  // namespace tpserve
