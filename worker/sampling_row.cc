#include "worker/sampling_row.h"

#include <algorithm>
#include <cmath>

#include "kernels/cpu/portable_math.h"
#include "worker/logits_processor.h"
#include "worker/sampling_weight.h"

namespace tpserve::sampling {

void PrepareRow(SamplingRow& row, const float* raw, int64_t vocab_begin, int64_t vocab_shard, int64_t vocab_size) {
  const SamplingParams& p = *row.params;
  row.is_greedy = p.is_greedy();
  row.use_top_k = !row.is_greedy && p.top_k > 0 && p.top_k < vocab_size;
  row.use_min_p = !row.is_greedy && p.min_p > 0.0f;
  row.use_top_p = !row.is_greedy && p.top_p < 1.0f;
  row.top_k = row.use_top_k ? p.top_k : 0;
  row.num_logprobs = static_cast<int32_t>(std::min<int64_t>(p.num_logprobs, vocab_size));
  row.needs_log_sum_exp = row.num_logprobs > 0;
  row.log_min_p = row.use_min_p ? PortableLog(static_cast<double>(p.min_p)) : 0.0;
  row.raw = raw;
  if (ProcessLogitsIsIdentity(p)) {
    row.x = raw;
  } else {
    row.processed.resize(static_cast<size_t>(vocab_shard));
    ProcessLogits(raw, vocab_begin, vocab_shard, p, row.plan->penalty_tokens, row.processed.data());
    row.x = row.processed.data();
  }
}

void DrawFromCandidates(SamplingRow& row, const std::vector<Candidate>& sorted, bool apply_filters) {
  const SamplingParams& p = *row.params;
  const float m = row.best.value;
  std::vector<Candidate> allowed;
  for (const Candidate& c : sorted) {
    if (apply_filters && row.use_min_p && !PassesMinP(c.value, m, row.log_min_p)) break;  // sorted: the rest fail too
    allowed.push_back(c);
  }
  if (apply_filters && row.use_top_p) {
    uint128 total = 0;
    for (const Candidate& c : allowed) total += SamplingWeight(c.value, m);
    const uint128 cutoff = NucleusCutoff(p.top_p, total);
    uint128 before = 0;
    size_t keep = 0;
    while (keep < allowed.size() && before <= cutoff) before += SamplingWeight(allowed[keep++].value, m);
    allowed.resize(keep);
  }
  for (const Candidate& c : allowed) {
    if (row.draw.Excludes(c.value)) break;  // sorted: no later token can win either
    row.draw.Offer(c, p.seed, row.plan->sample_index);
  }
}

}  // namespace tpserve::sampling
