// The distributed sampler: every row's parameters are checked before any collective (so every
// rank fails alike), then at most four AllGathers for the whole batch, whatever its size. What
// crosses ranks per row is a handful of numbers plus the candidates of the filters (k for top-k,
// the local nucleus for top-p, num_logprobs for top_logprobs):
//   rounds 1-2, maxima and sums (worker/sampling_rounds.h); after round 1 the greedy rows are
//     decided and the top-k rows draw from the gathered top-k (worker/sampling_row.h);
//   rounds 3-4, the top-p rows without top-k (worker/top_p_rounds.h).
// The pieces they share: worker/sampling_candidate.h (a token on its way through the filters,
// their order and selection), worker/gumbel_draw.h (the Gumbel-max winner).
#include "worker/sampler.h"

#include <cmath>
#include <limits>
#include <string>

#include "worker/sampling_rounds.h"
#include "worker/sampling_row.h"
#include "worker/top_p_rounds.h"

namespace tpserve {
namespace {

using sampling::AllGatherPayload;
using sampling::Candidate;
using sampling::DrawFromCandidates;
using sampling::NucleusRounds;
using sampling::PackRound1;
using sampling::PackRound2;
using sampling::PrepareRow;
using sampling::SamplingRow;
using sampling::UnpackRound1;
using sampling::UnpackRound2;

Status CheckFinite(float v, const char* name) {
  if (std::isnan(v) || std::isinf(v)) return InvalidArgument(std::string(name) + " must be finite");
  return OkStatus();
}

}  // namespace

Status ValidateSamplingParams(const SamplingParams& params, const std::vector<int32_t>& penalty_tokens,
                              int64_t vocab_size) {
  if (std::isnan(params.temperature) || std::isinf(params.temperature)) {
    return InvalidArgument("temperature must be finite");
  }
  if (params.top_k < 0) return InvalidArgument("top_k must be >= 0");
  if (!(params.top_p > 0.0f && params.top_p <= 1.0f)) return InvalidArgument("top_p must be in (0, 1]");
  if (!(params.min_p >= 0.0f && params.min_p <= 1.0f)) return InvalidArgument("min_p must be in [0, 1]");
  if (!(params.repetition_penalty > 0.0f) || std::isinf(params.repetition_penalty)) {
    return InvalidArgument("repetition_penalty must be finite and > 0");
  }
  RETURN_IF_ERROR(CheckFinite(params.presence_penalty, "presence_penalty"));
  RETURN_IF_ERROR(CheckFinite(params.frequency_penalty, "frequency_penalty"));
  if (params.num_logprobs < 0) return InvalidArgument("num_logprobs must be >= 0");
  for (const auto& [id, bias] : params.logit_bias) {
    if (id < 0 || id >= vocab_size) {
      return InvalidArgument("logit_bias token " + std::to_string(id) + " outside the vocabulary of " +
                             std::to_string(vocab_size));
    }
    if (std::isnan(bias) || bias == std::numeric_limits<float>::infinity()) {
      return InvalidArgument("logit_bias values must be finite or -inf");
    }
  }
  if (params.has_penalties()) {
    for (int32_t id : penalty_tokens) {
      if (id < 0 || id >= vocab_size) {
        return InvalidArgument("penalty token " + std::to_string(id) + " outside the vocabulary of " +
                               std::to_string(vocab_size));
      }
    }
  }
  return OkStatus();
}

StatusOr<std::vector<SequenceResult>> SampleTokens(const float* logits, int64_t num_rows, int64_t vocab_begin,
                                                   int64_t vocab_shard, int64_t vocab_size,
                                                   const std::vector<const SequencePlan*>& seqs, Communicator& comm) {
  CHECK_EQ(static_cast<int64_t>(seqs.size()), num_rows);
  CHECK(vocab_begin >= 0 && vocab_shard >= 0 && vocab_begin + vocab_shard <= vocab_size)
      << vocab_begin << " + " << vocab_shard << " of " << vocab_size;
  CHECK_LE(vocab_size, int64_t{1} << 31);
  CHECK(logits != nullptr || num_rows * vocab_shard == 0);
  if (num_rows == 0) return std::vector<SequenceResult>{};

  // Every rank sees the same plans, so every rank returns the same error here, before any collective.
  for (int64_t s = 0; s < num_rows; ++s) {
    const Status status = ValidateSamplingParams(seqs[s]->sampling, seqs[s]->penalty_tokens, vocab_size);
    if (!status.ok()) return Status(status.code(), "row " + std::to_string(s) + ": " + status.message());
  }

  std::vector<SamplingRow> rows(static_cast<size_t>(num_rows));
  FloatPacker round1;
  for (int64_t s = 0; s < num_rows; ++s) {
    SamplingRow& row = rows[static_cast<size_t>(s)];
    row.plan = seqs[static_cast<size_t>(s)];
    row.params = &row.plan->sampling;
    PrepareRow(row, logits + s * vocab_shard, vocab_begin, vocab_shard, vocab_size);
    PackRound1(row, vocab_begin, vocab_shard, round1);
  }
  ASSIGN_OR_RETURN(const std::vector<float> gathered1, AllGatherPayload(comm, round1));
  UnpackRound1(gathered1, comm.size(), rows);
  for (int64_t s = 0; s < num_rows; ++s) {
    const SamplingRow& row = rows[static_cast<size_t>(s)];
    if (row.is_bad) return Internal("row " + std::to_string(s) + ": NaN or +inf logits");
    if (row.best.id < 0) return InvalidArgument("row " + std::to_string(s) + ": every token is banned");
  }

  FloatPacker round2;
  for (SamplingRow& row : rows) {
    if (row.is_greedy) {
      row.draw.id = row.best.id;
      row.draw.raw = row.best.raw;
    } else if (row.use_top_k) {
      DrawFromCandidates(row, row.top_k_set, /*apply_filters=*/true);
    }
    PackRound2(row, vocab_begin, vocab_shard, round2);
  }
  ASSIGN_OR_RETURN(const std::vector<float> gathered2, AllGatherPayload(comm, round2));
  UnpackRound2(gathered2, comm.size(), rows);
  RETURN_IF_ERROR(NucleusRounds(rows, vocab_begin, vocab_shard, comm));

  std::vector<SequenceResult> results(static_cast<size_t>(num_rows));
  for (size_t s = 0; s < rows.size(); ++s) {
    const SamplingRow& row = rows[s];
    CHECK_GE(row.draw.id, 0) << "row " << s << " drew no token";
    SequenceResult& result = results[s];
    result.seq_id = row.plan->seq_id;
    result.token_id = row.draw.id;
    if (row.needs_log_sum_exp) result.logprob = sampling::LogprobOf(row, row.draw.raw);
    for (const Candidate& c : row.top_logprobs) result.top_logprobs.push_back({c.id, sampling::LogprobOf(row, c.raw)});
  }
  return results;
}

}  // namespace tpserve
