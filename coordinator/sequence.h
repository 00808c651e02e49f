// Sequence: the coordinator's state of one sample of one request (n > 1 samples of a request are
// separate sequences sharing the prompt's KV blocks). Plain data owned by the Scheduler; the
// Scheduler and BlockManager are the only writers, everyone else reads through
// Scheduler::FindSequence or the events of Scheduler::Postprocess.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "comm/step_plan.h"
#include "coordinator/speculation.h"

namespace tpserve {

enum class SequenceStatus {
  kWaiting,   // queued, holds no KV blocks (new, or preempted: it re-prefills prompt + output)
  kRunning,   // holds KV blocks; prefilling (possibly over several chunks) or decoding
  kFinished,  // done; blocks freed
};

enum class FinishReason {
  kNone = 0,   // not finished
  kStop,       // EOS or a stop token (or a stop string, reported by the server through Abort)
  kLength,     // max_tokens or max_model_len reached
  kCancelled,  // client cancel or vanished client
  kError,      // a worker returned no usable token for it
};

const char* SequenceStatusName(SequenceStatus status);
const char* FinishReasonName(FinishReason reason);  // "stop", "length", "cancelled", "error"

// When a sequence stops, besides cancellation.
struct StoppingCriteria {
  int32_t max_tokens = 16;              // > 0: output tokens at most
  std::vector<int32_t> stop_token_ids;  // finish (reason kStop) right after sampling one of these
  bool ignore_eos = false;
  int32_t eos_token_id = -1;            // -1: the model has none
};

// The sequence ids of one request: seq_id = request_id * kMaxSamplesPerRequest + sample_index,
// so a request's sequence ids depend on its request id alone (never on what else is queued).
constexpr int32_t kMaxSamplesPerRequest = 256;
constexpr uint64_t kMaxRequestId = (uint64_t{1} << 55) - 1;
inline uint64_t SequenceIdOf(uint64_t request_id, int32_t sample_index) {
  return request_id * kMaxSamplesPerRequest + static_cast<uint64_t>(sample_index);
}

// The sampling seed of sample `sample_index` of a request seeded with `request_seed`. The worker's
// draws are a function of (seed, token index, token id) only, so the samples of one request need
// distinct seeds; sample 0 keeps the request's seed, so n = 1 equals tpserve-run with that seed.
uint64_t SampleSeed(uint64_t request_seed, int32_t sample_index);

// A fresh seed (64 bits of std::random_device) for a request that gave none, as vLLM does: unseeded
// requests draw different tokens, and the seed, reported in each Finish, replays the request.
uint64_t DrawRequestSeed();

struct Sequence {
  // Identity and request settings (fixed at Add).
  uint64_t seq_id = 0;
  uint64_t request_id = 0;
  int32_t sample_index = 0;  // which of the request's n samples
  std::vector<int32_t> prompt_ids;  // [P]
  SamplingParams sampling;
  StoppingCriteria stopping;
  int32_t priority = 0;        // smaller runs first when SchedulerConfig::enable_priority
  uint64_t arrival_order = 0;  // assigned by Scheduler::Add; FCFS tie-break, same for all samples
  bool wants_prompt_logprobs = false;  // the request asked for the logprob of every prompt token
  SpeculativeConfig speculative;       // proposals for its decode steps (coordinator/speculation.h)

  // Progress.
  std::vector<int32_t> output_ids;  // [O] sampled so far (kept across preemption)
  std::vector<float> output_logprobs;  // [O]
  SequenceStatus status = SequenceStatus::kWaiting;
  FinishReason finish_reason = FinishReason::kNone;
  // Tokens (of prompt ++ output) whose K/V are in the cache: positions [0, num_computed).
  int32_t num_computed = 0;
  // Prompt tokens served from the prefix cache at the first allocation (for usage reporting).
  int32_t num_cached_prompt_tokens = 0;
  int32_t num_preemptions = 0;
  SpeculationState speculation;  // adaptive proposal length and acceptance counts
  // Speculation by a draft model: positions [0, num_draft_computed) have their K/V in the group's
  // draft model too (SequencePlan::draft_catch_up covers the rest up to num_computed).
  int32_t num_draft_computed = 0;
  // Beam search (ScheduleRequest::beam): this hypothesis's sum of output_logprobs, and the
  // candidates for its next token, held ("parked", not scheduled) until every live beam of the
  // request has its own (coordinator/scheduler_beam.cc).
  double cumulative_logprob = 0;
  bool beam_parked = false;
  std::vector<TokenLogprob> beam_candidates;
  // Logprobs of prompt tokens 1.. scored so far (prompt_logprobs[i]: token i + 1 given 0..i), while
  // needs_prompt_logprobs(); handed to the first token's event, then empty.
  std::vector<PromptTokenLogprob> prompt_logprobs;  // [<= P - 1]

  // KV memory (written by BlockManager): logical block i, layer group g (kvstore/kv_groups.h) ->
  // page block_table[i * G + g]; -1 for a sliding group's page that fell out of the window.
  std::vector<int32_t> block_table;  // [ceil(allocated positions / block_size) * G]
  // Chained content hashes of the leading full blocks whose K/V are computed.
  std::vector<uint64_t> block_hashes;  // [<= num_computed / block_size]

  // Timing, in seconds of the Scheduler's clock. first/last token are < 0 until a token exists.
  double arrival_time_s = 0;
  double first_token_time_s = -1;
  double last_token_time_s = -1;
  double finish_time_s = -1;

  int32_t num_prompt_tokens() const { return static_cast<int32_t>(prompt_ids.size()); }
  int32_t num_output_tokens() const { return static_cast<int32_t>(output_ids.size()); }
  int32_t num_tokens() const { return num_prompt_tokens() + num_output_tokens(); }
  // Token at position `pos` of prompt ++ output. REQUIRES: 0 <= pos < num_tokens().
  int32_t token_at(int32_t pos) const;
  // prompt ++ output.
  std::vector<int32_t> AllTokens() const;
  // Tokens still to be computed before the next token can be sampled.
  int32_t num_uncomputed() const { return num_tokens() - num_computed; }
  bool is_finished() const { return status == SequenceStatus::kFinished; }
  // Its prompt logprobs are not out yet (they go with the first sampled token). Until then its
  // prefill must compute every prompt position, so it takes no cached prefix blocks.
  bool needs_prompt_logprobs() const { return wants_prompt_logprobs && output_ids.empty(); }

  // Time to first token and mean time per output token after the first (seconds; -1 if unknown).
  double ttft_s() const;
  double tpot_s() const;
};

}  // namespace tpserve
