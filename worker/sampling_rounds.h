// The first two all-gather rounds of the distributed sampler (worker/sampler.h), each one
// AllGather for the whole batch. Pack* writes this rank's payload of one row; Unpack* reads every
// rank's payloads (in rank order, so every rank ends with the same bits) into the rows.
//   1. maxima: the raw max (for the log-sum-exp), a NaN/+inf flag, the processed argmax (greedy
//      rows; the m of min-p and top-p), local top-k and top-logprob candidates. Greedy and top-k
//      rows are then decided: every rank holds a superset of their allowed set.
//   2. sums: the raw sum of exp(x - max) (log-sum-exp, double) of rows that need logprobs; for the
//      other sampling rows either the local Gumbel winner (no top-p) or the local weight sum of the
//      tokens left after min-p (top-p, whose nucleus the top-p rounds then find: worker/top_p_rounds.h).
// Internal to the sampler.
#pragma once

#include <cstdint>
#include <vector>

#include "comm/communicator.h"
#include "common/status.h"
#include "worker/float_packing.h"
#include "worker/sampling_row.h"

namespace tpserve::sampling {

// The payloads of every rank, concatenated in rank order (each rank's as long as this one's).
StatusOr<std::vector<float>> AllGatherPayload(Communicator& comm, const FloatPacker& packer);

// Round 1 payload of one row: [raw max, bad flag, processed argmax, top-k, top-logprobs].
void PackRound1(SamplingRow& row, int64_t vocab_begin, int64_t vocab_shard, FloatPacker& packer);
void UnpackRound1(const std::vector<float>& gathered, int num_ranks, std::vector<SamplingRow>& rows);

// Round 2 payload of one row: [raw weight sum, if needs_log_sum_exp] + [nucleus weight sum | local Gumbel
// winner]. Empty for a greedy or top-k row without logprobs, so a batch of those skips the all-gather.
// REQUIRES: round 1 unpacked.
void PackRound2(const SamplingRow& row, int64_t vocab_begin, int64_t vocab_shard, FloatPacker& packer);
// Sets log_sum_exp, nucleus_total (top-p rows) and the draw of rows without top-k or top-p.
void UnpackRound2(const std::vector<float>& gathered, int num_ranks, std::vector<SamplingRow>& rows);

}  // namespace tpserve::sampling
