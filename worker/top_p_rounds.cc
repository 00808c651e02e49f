#include "worker/top_p_rounds.h"

#include <algorithm>
#include <limits>

#include "worker/sampling_rounds.h"
#include "worker/sampling_weight.h"

namespace tpserve::sampling {
namespace {

// This rank's part of a top-p row's nucleus: its tokens left after min-p, in Before order, while
// the weights before them (on this rank) stay within the global cutoff.
void FindLocalNucleus(SamplingRow& row, int64_t vocab_begin, int64_t vocab_shard) {
  const float m = row.best.value;
  std::vector<Candidate> left;
  for (int64_t i = 0; i < vocab_shard; ++i) {
    const float x = row.x[i];
    if (x > kNegInf && (!row.use_min_p || PassesMinP(x, m, row.log_min_p))) {
      left.push_back(Candidate{x, row.raw[i], static_cast<int32_t>(vocab_begin + i)});
    }
  }
  const uint128 cutoff = NucleusCutoff(row.params->top_p, row.nucleus_total);
  uint128 before = 0;
  size_t sorted = 0;  // left[0, sorted) is in final order
  for (size_t i = 0; i < left.size() && before <= cutoff; ++i) {
    if (i == sorted) {  // select and sort the next stretch only when the walk reaches it: O(V) each
      const size_t end = std::min(left.size(), std::max<size_t>(64, 4 * sorted));
      const auto first = left.begin() + static_cast<std::ptrdiff_t>(sorted);
      const auto middle = left.begin() + static_cast<std::ptrdiff_t>(end);
      if (middle != left.end()) std::nth_element(first, middle, left.end(), Before);
      std::sort(first, middle, Before);
      sorted = end;
    }
    row.local_nucleus.push_back(left[i]);
    before += SamplingWeight(left[i].value, m);
  }
}

}  // namespace

Status NucleusRounds(std::vector<SamplingRow>& rows, int64_t vocab_begin, int64_t vocab_shard, Communicator& comm) {
  FloatPacker counts;
  for (SamplingRow& row : rows) {
    if (!row.NeedsNucleusRounds()) continue;
    FindLocalNucleus(row, vocab_begin, vocab_shard);
    counts.PushU32(static_cast<uint32_t>(row.local_nucleus.size()));
  }
  if (counts.size() == 0) return OkStatus();
  ASSIGN_OR_RETURN(const std::vector<float> gathered_counts, AllGatherPayload(comm, counts));
  std::vector<uint32_t> max_count;  // per nucleus row
  for (int r = 0; r < comm.size(); ++r) {
    FloatUnpacker in(gathered_counts.data() + counts.size() * static_cast<size_t>(r), counts.size());
    for (size_t j = 0; in.position() < counts.size(); ++j) {
      const uint32_t count = in.PopU32();
      if (j == max_count.size()) max_count.push_back(0);
      max_count[j] = std::max(max_count[j], count);
    }
  }
  FloatPacker candidates;
  size_t j = 0;
  for (const SamplingRow& row : rows) {
    if (!row.NeedsNucleusRounds()) continue;
    for (uint32_t i = 0; i < max_count[j]; ++i) {
      PushCandidate(candidates, i < row.local_nucleus.size() ? row.local_nucleus[i] : Candidate{});
    }
    ++j;
  }
  ASSIGN_OR_RETURN(const std::vector<float> gathered, AllGatherPayload(comm, candidates));
  std::vector<std::vector<Candidate>> unions(rows.size());
  for (int r = 0; r < comm.size(); ++r) {
    FloatUnpacker in(gathered.data() + candidates.size() * static_cast<size_t>(r), candidates.size());
    j = 0;
    for (size_t s = 0; s < rows.size(); ++s) {
      if (!rows[s].NeedsNucleusRounds()) continue;
      for (uint32_t i = 0; i < max_count[j]; ++i) unions[s].push_back(PopCandidate(in));
      ++j;
    }
  }
  for (size_t s = 0; s < rows.size(); ++s) {
    if (!rows[s].NeedsNucleusRounds()) continue;
    // The union holds the nucleus; the walk over it with the global total finds it exactly.
    std::vector<Candidate> sorted = BestOf(std::move(unions[s]), std::numeric_limits<size_t>::max());
    const uint128 cutoff = NucleusCutoff(rows[s].params->top_p, rows[s].nucleus_total);
    uint128 before = 0;
    size_t keep = 0;
    while (keep < sorted.size() && before <= cutoff) before += SamplingWeight(sorted[keep++].value, rows[s].best.value);
    sorted.resize(keep);
    DrawFromCandidates(rows[s], sorted, /*apply_filters=*/false);
  }
  return OkStatus();
}

}  // namespace tpserve::sampling
