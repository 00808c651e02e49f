#include "worker/token_scorer.h"

#include <algorithm>
#include <string>

#include "worker/sampling_rounds.h"
#include "worker/sampling_row.h"

namespace tpserve {

using sampling::AllGatherPayload;
using sampling::Candidate;
using sampling::kNegInf;
using sampling::SamplingRow;

StatusOr<std::vector<PromptTokenLogprob>> ScoreTokens(const float* logits, int64_t num_rows, int64_t vocab_begin,
                                                      int64_t vocab_shard, int64_t vocab_size,
                                                      const std::vector<int32_t>& targets,
                                                      const std::vector<int32_t>& num_logprobs, Communicator& comm) {
  CHECK_EQ(static_cast<int64_t>(targets.size()), num_rows);
  CHECK_EQ(static_cast<int64_t>(num_logprobs.size()), num_rows);
  CHECK(vocab_begin >= 0 && vocab_shard >= 0 && vocab_begin + vocab_shard <= vocab_size)
      << vocab_begin << " + " << vocab_shard << " of " << vocab_size;
  CHECK(logits != nullptr || num_rows * vocab_shard == 0);
  if (num_rows == 0) return std::vector<PromptTokenLogprob>{};

  // Each row as the sampler sees a greedy row without bias or penalties: its processed logits
  // are the raw ones, and only the raw max, the top-n and the log-sum-exp matter.
  std::vector<SequencePlan> plans(static_cast<size_t>(num_rows));
  std::vector<SamplingRow> rows(static_cast<size_t>(num_rows));
  FloatPacker round1;
  for (int64_t r = 0; r < num_rows; ++r) {
    CHECK(targets[r] >= 0 && targets[r] < vocab_size) << targets[r];
    CHECK_GE(num_logprobs[r], 0);
    plans[r].sampling.num_logprobs = num_logprobs[r];
    rows[r].plan = &plans[r];
    rows[r].params = &plans[r].sampling;
    sampling::PrepareRow(rows[r], logits + r * vocab_shard, vocab_begin, vocab_shard, vocab_size);
    rows[r].needs_log_sum_exp = true;  // the target's logprob, asked or not
    sampling::PackRound1(rows[r], vocab_begin, vocab_shard, round1);
  }
  ASSIGN_OR_RETURN(const std::vector<float> gathered1, AllGatherPayload(comm, round1));
  sampling::UnpackRound1(gathered1, comm.size(), rows);
  for (int64_t r = 0; r < num_rows; ++r) {
    if (rows[r].is_bad) return Internal("scored row " + std::to_string(r) + ": NaN or +inf logits");
  }

  // Round 2 (the log-sum-exp), and each target's raw logit from the rank that holds it (the
  // others send -inf, so the maximum over ranks is that logit).
  FloatPacker round2, target_raw;
  for (int64_t r = 0; r < num_rows; ++r) {
    sampling::PackRound2(rows[r], vocab_begin, vocab_shard, round2);
    const int64_t local = targets[r] - vocab_begin;
    target_raw.PushFloat(local >= 0 && local < vocab_shard ? logits[r * vocab_shard + local] : kNegInf);
  }
  ASSIGN_OR_RETURN(const std::vector<float> gathered2, AllGatherPayload(comm, round2));
  sampling::UnpackRound2(gathered2, comm.size(), rows);
  ASSIGN_OR_RETURN(const std::vector<float> gathered_raw, AllGatherPayload(comm, target_raw));

  std::vector<PromptTokenLogprob> results(static_cast<size_t>(num_rows));
  for (int64_t r = 0; r < num_rows; ++r) {
    float raw = kNegInf;
    for (int rank = 0; rank < comm.size(); ++rank) raw = std::max(raw, gathered_raw[rank * num_rows + r]);
    PromptTokenLogprob& result = results[r];
    result.token_id = targets[r];
    result.logprob = sampling::LogprobOf(rows[r], raw);
    for (const Candidate& c : rows[r].top_logprobs) result.top_logprobs.push_back({c.id, sampling::LogprobOf(rows[r], c.raw)});
  }
  return results;
}

}  // namespace tpserve
