// The Scheduler's half of speculative decoding (coordinator/speculation.h): what a decode step
// proposes, the draft model's proposals coming back with the step, and the tokens a verified step keeps.
#include <algorithm>
#include <string>

#include "common/check.h"
#include "coordinator/scheduler.h"

namespace tpserve {

bool Scheduler::UsesDraftModel(const Sequence& seq) const {
  return config_.has_draft_model && seq.speculative.enabled() && seq.speculative.method == SpeculativeMethod::kDraft;
}

std::vector<int32_t> Scheduler::Drafts(Sequence& seq, int32_t max_drafts) const {
  if (!seq.speculative.enabled() || seq.num_uncomputed() != 1 || seq.needs_prompt_logprobs() ||
      HasPendingChildren(seq) || exploring_) {
    return {};
  }
  // Row j of the step samples output token O + j: the last one allowed is max_tokens - 1, and the
  // context ends at max_model_len tokens.
  const int32_t k = std::min({seq.speculation.k, max_drafts, seq.stopping.max_tokens - seq.num_output_tokens() - 1,
                              config_.max_model_len - seq.num_tokens() - 1});
  if (k <= 0) return {};
  const bool paused = seq.speculation.is_paused(min_acceptance_);
  if (seq.speculative.method == SpeculativeMethod::kDraft) {
    // The worker's draft model proposes them in the step itself: reserve their slots. Its proposals
    // are not free (its catch-up on the tokens since its last proposal included), so a paused
    // sequence only probes, with one proposal every kProbeInterval steps.
    if (!UsesDraftModel(seq)) return {};
    if (!paused) return std::vector<int32_t>(k, kProposalToCome);
    // Where a verified position costs what a token is worth (break-even 1) no acceptance pays: no probe.
    if (min_acceptance_ >= 1 || ++seq.speculation.paused_steps < SpeculationState::kProbeInterval) return {};
    seq.speculation.paused_steps = 0;
    return {kProposalToCome};
  }
  std::vector<int32_t> proposed = ProposeNgram(seq.prompt_ids, seq.output_ids, paused ? 1 : k,
                                               seq.speculative.min_ngram, seq.speculative.max_ngram);
  if (!paused) return proposed;
  seq.speculation.shadow = proposed.empty() ? -1 : proposed[0];
  return {};
}

Status Scheduler::TakeProposals(const StepResult& result) {
  size_t next = 0;
  for (InFlightSequence& planned : in_flight_plan_) {
    if (!planned.draft_model || planned.drafts.empty()) continue;
    const std::string seq = std::to_string(planned.seq_id);
    if (next >= result.proposals.size() || result.proposals[next].seq_id != planned.seq_id) {
      return InvalidArgument("step " + std::to_string(result.step_id) + " result lacks the proposals of seq " + seq);
    }
    const std::vector<int32_t>& proposed = result.proposals[next++].token_ids;
    if (proposed.size() > planned.drafts.size()) {
      return InvalidArgument("step " + std::to_string(result.step_id) + " result has " +
                             std::to_string(proposed.size()) + " proposals for seq " + seq + ", asked for " +
                             std::to_string(planned.drafts.size()));
    }
    planned.drafts = proposed;
  }
  if (next != result.proposals.size()) {
    return InvalidArgument("step " + std::to_string(result.step_id) + " result has proposals nobody asked for");
  }
  return OkStatus();
}

std::vector<SequenceEvent> Scheduler::ApplySampled(Sequence* seq, int32_t num_tokens,
                                                   const std::vector<int32_t>& drafts, const SequenceResult* rows,
                                                   double now) {
  // Rows 0..accepted: the proposals equal to the tokens sampled before them, then one more.
  const int32_t num_drafts = static_cast<int32_t>(drafts.size());
  int32_t accepted = 0;
  while (accepted < num_drafts && rows[accepted].token_id == drafts[accepted]) ++accepted;
  if (seq->speculation.shadow >= 0) {  // paused: would its proposal have been kept?
    seq->speculation.OnShadow(rows[0].token_id == seq->speculation.shadow);
    seq->speculation.shadow = -1;
  }
  std::vector<SequenceEvent> events;
  FinishReason reason = FinishReason::kNone;
  for (int32_t j = 0; j <= accepted && reason == FinishReason::kNone; ++j) {
    const SequenceResult& sampled = rows[j];
    SequenceEvent& event = events.emplace_back();
    event.seq_id = seq->seq_id;
    event.request_id = seq->request_id;
    event.sample_index = seq->sample_index;
    event.usage.num_output_tokens = seq->num_output_tokens();
    if (sampled.token_id < 0) {
      reason = FinishReason::kError;
      break;
    }
    seq->output_ids.push_back(sampled.token_id);
    ++event.usage.num_output_tokens;
    seq->output_logprobs.push_back(sampled.logprob);
    if (seq->first_token_time_s < 0) seq->first_token_time_s = now;
    seq->last_token_time_s = now;
    event.token_id = sampled.token_id;
    event.logprob = sampled.logprob;
    event.top_logprobs = sampled.top_logprobs;
    if (seq->wants_prompt_logprobs && seq->num_output_tokens() == 1) {
      CHECK_EQ(static_cast<int32_t>(seq->prompt_logprobs.size()), seq->num_prompt_tokens() - 1)
          << "seq " << seq->seq_id;
      event.has_prompt_logprobs = true;
      event.prompt_ids = seq->prompt_ids;
      event.prompt_logprobs = std::move(seq->prompt_logprobs);
      seq->prompt_logprobs.clear();
    }
    if (StopsAfter(*seq, sampled.token_id)) {
      reason = FinishReason::kStop;
    } else if (seq->num_output_tokens() >= seq->stopping.max_tokens || seq->num_tokens() >= config_.max_model_len) {
      reason = FinishReason::kLength;
    }
  }
  // Every token but the last one kept has its K/V computed: the step's own tokens and the kept
  // proposals, as plain decoding would have them when it sampled that last token.
  const int32_t num_kept = static_cast<int32_t>(events.size());
  seq->num_computed += num_tokens + num_kept - 1;
  block_manager_.MarkComputed(*seq);
  if (num_drafts > 0) {
    block_manager_.DropLookahead(*seq);
    const int32_t kept_drafts = std::max(0, num_kept - 1);
    seq->speculation.OnVerified(num_drafts, kept_drafts, seq->speculative.num_tokens);
    ++num_verify_steps_;
    num_draft_tokens_ += num_drafts;
    num_accepted_tokens_ += kept_drafts;
  }
  if (reason != FinishReason::kNone) Finish(seq, reason);
  // Each event's usage counts the tokens up to its own (the server cuts at a stop string there).
  for (SequenceEvent& event : events) {
    const int32_t num_output = event.usage.num_output_tokens;
    event.usage = UsageOf(*seq);
    event.usage.num_output_tokens = num_output;
  }
  if (reason != FinishReason::kNone) {
    events.back().is_finished = true;
    events.back().finish_reason = reason;
  }
  return events;
}

}  // namespace tpserve
