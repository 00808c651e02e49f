// SchedulerConfig: the knobs of the iteration-level scheduler (one Scheduler per worker group).
#pragma once

#include <cstdint>

namespace tpserve {

struct SchedulerConfig {
  // Most sequences holding KV blocks at once (running, including partially prefilled ones).
  int32_t max_num_seqs = 64;
  // Token budget of one step: decode tokens (one per running sequence) plus prefill tokens.
  int32_t max_num_batched_tokens = 2048;
  // Admission control: Add fails with RESOURCE_EXHAUSTED ("overloaded") when the waiting queue
  // would hold more than this many sequences (preempted sequences count too).
  int32_t max_queue = 256;
  // ... or when the waiting sequences' tokens still to prefill would exceed this many: the queue is
  // bounded in work, not only in requests, so a flood of long prompts is refused at once instead of
  // stretching every admitted request's TTFT (0: no bound).
  int64_t max_queued_tokens = 262144;
  // Longest sequence (prompt + output) the model serves; a request whose prompt + max_tokens
  // exceeds it is refused with OUT_OF_RANGE.
  int32_t max_model_len = 2048;
  // On: a prompt is split across steps to fit the remaining budget, so a long prompt never stalls
  // decodes. Off: a new prompt is scheduled whole or waits (prompts longer than the budget are
  // refused at Add with OUT_OF_RANGE; a preempted sequence longer than the budget is still chunked).
  bool enable_chunked_prefill = true;
  // Upper bound on the tokens of one prefill chunk (0: the remaining budget is the only bound).
  int32_t prefill_chunk = 0;
  // Reuse KV blocks of identical prompt prefixes (full blocks, content-hashed).
  bool enable_prefix_caching = true;
  // On: waiting and running sequences are ordered by (priority ascending, arrival); off: arrival.
  bool enable_priority = false;
  // The worker group loaded a draft model (tpserve-worker --draft-model): requests may speculate with it.
  bool has_draft_model = false;
};

}  // namespace tpserve
