// The Scheduler when its worker group's KV memory is gone: the in-flight step discarded, every
// running sequence preempted, and the handover of every live request to another group's scheduler
// (ReleaseAll / Adopt), which continues them with the very tokens this one would have produced.
#include <string>

#include "coordinator/scheduler.h"

namespace tpserve {

void Scheduler::DiscardInFlight() {
  if (!in_flight_) return;
  in_flight_ = false;
  for (const InFlightSequence& planned : in_flight_plan_) {
    auto it = live_.find(planned.seq_id);
    if (it != live_.end() && it->second->status == SequenceStatus::kRunning) Preempt(it->second.get());
  }
  in_flight_plan_.clear();
  (void)block_manager_.TakeBlockCopies();
}

void Scheduler::ResetKvCache() {
  DiscardInFlight();
  while (!running_.empty()) Preempt(running_.back());
  block_manager_.ResetPrefixCache();
}

std::vector<ReleasedRequest> Scheduler::ReleaseAll() {
  ResetKvCache();  // every sequence waiting (or pending its fork), no blocks, nothing computed
  std::vector<ReleasedRequest> released;
  for (auto& [seq_id, seq] : live_) {  // by seq id: grouped by request, samples in order
    if (released.empty() || released.back().request_id != seq->request_id) {
      ReleasedRequest request;
      request.request_id = seq->request_id;
      request.has_pending_forks = pending_forks_.count(seq->request_id) > 0;
      if (auto beam = beams_.find(seq->request_id); beam != beams_.end()) request.beam = std::move(beam->second);
      released.push_back(std::move(request));
    }
    released.back().sequences.push_back(std::move(seq));
  }
  live_.clear();
  waiting_.clear();
  pending_forks_.clear();
  beams_.clear();
  return released;
}

Status Scheduler::Adopt(ReleasedRequest request) {
  if (request.sequences.empty()) return InvalidArgument("nothing to adopt");
  const Sequence& first = *request.sequences.front();
  RETURN_IF_ERROR(CheckFits(first.num_prompt_tokens(), first.stopping.max_tokens));
  for (const auto& seq : request.sequences) {
    if (seq->status != SequenceStatus::kWaiting || !seq->block_table.empty() || seq->num_computed != 0) {
      return InvalidArgument("seq " + std::to_string(seq->seq_id) + " was not released");
    }
    if (live_.count(seq->seq_id)) return InvalidArgument("seq " + std::to_string(seq->seq_id) + " is already live");
  }
  const uint64_t arrival = next_arrival_++;
  if (request.beam != nullptr) beams_[first.request_id] = std::move(request.beam);
  // Samples still waiting to fork keep waiting for their leader (sample 0), here as there.
  const bool fork = request.has_pending_forks && first.sample_index == 0;
  for (auto& seq : request.sequences) {
    seq->arrival_order = arrival;
    Sequence* raw = seq.get();
    live_.emplace(raw->seq_id, std::move(seq));
    if (fork && raw->sample_index > 0) {
      pending_forks_[raw->request_id].push_back(raw);
    } else {
      InsertOrdered(waiting_, raw);
    }
  }
  return OkStatus();
}

}  // namespace tpserve
