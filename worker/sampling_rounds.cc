#include "worker/sampling_rounds.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "kernels/cpu/portable_math.h"
#include "worker/counter_rng.h"
#include "worker/sampling_weight.h"
#include "worker/sum_exp.h"

namespace tpserve::sampling {
namespace {

// The n best finite tokens of this rank's slice (Before order), padded to n. values/raw: [V_shard].
// In this file, beside its only caller, so that it inlines into the round 1 scan.
std::vector<Candidate> LocalTop(const float* values, const float* raw, int64_t vocab_begin, int64_t vocab_shard,
                                int32_t n) {
  std::vector<Candidate> heap;  // a max-heap under Before: front() is the worst kept
  heap.reserve(static_cast<size_t>(n));
  for (int64_t i = 0; i < vocab_shard && n > 0; ++i) {
    if (!(values[i] > kNegInf)) continue;
    const Candidate c{values[i], raw[i], static_cast<int32_t>(vocab_begin + i)};
    if (heap.size() < static_cast<size_t>(n)) {
      heap.push_back(c);
      std::push_heap(heap.begin(), heap.end(), Before);
    } else if (Before(c, heap.front())) {
      std::pop_heap(heap.begin(), heap.end(), Before);
      heap.back() = c;
      std::push_heap(heap.begin(), heap.end(), Before);
    }
  }
  std::sort_heap(heap.begin(), heap.end(), Before);
  heap.resize(static_cast<size_t>(n));
  return heap;
}

}  // namespace

StatusOr<std::vector<float>> AllGatherPayload(Communicator& comm, const FloatPacker& packer) {
  std::vector<float> gathered(packer.size() * static_cast<size_t>(comm.size()));
  if (packer.size() > 0) RETURN_IF_ERROR(comm.AllGather(packer.data().data(), packer.size(), gathered.data()));
  return gathered;
}

void PackRound1(SamplingRow& row, int64_t vocab_begin, int64_t vocab_shard, FloatPacker& packer) {
  // This runs over every logit of every row: 16 lanes of maxima (GCC keeps a scalar `r > m ? r : m` scalar,
  // as its result may differ from a max instruction's in the sign of a zero; here a lane's −0 may stand for
  // a +0, which no use of the maxima tells apart: x == x_max, r − raw_max), and a NaN or +inf raw logit is
  // one that is not below +inf. Scalar, the scan was 5 % of a batch-64 decode step.
  using Lanes = float __attribute__((vector_size(64)));
  using Mask = int32_t __attribute__((vector_size(64)));
  constexpr int64_t kLanes = sizeof(Lanes) / sizeof(float);
  const float inf = std::numeric_limits<float>::infinity();
  Lanes raw_lanes = Lanes{} + kNegInf, x_lanes = raw_lanes;
  Mask bad_lanes = {};
  int64_t i = 0;
  for (; i + kLanes <= vocab_shard; i += kLanes) {
    Lanes r, x;
    std::memcpy(&r, row.raw + i, sizeof r);
    std::memcpy(&x, row.x + i, sizeof x);
    bad_lanes |= !(r < inf);
    raw_lanes = r > raw_lanes ? r : raw_lanes;
    x_lanes = x > x_lanes ? x : x_lanes;
  }
  float raw_max = kNegInf, x_max = kNegInf;
  bool is_bad = false;
  for (int64_t l = 0; l < kLanes; ++l) {
    is_bad |= bad_lanes[l] != 0;
    raw_max = raw_lanes[l] > raw_max ? raw_lanes[l] : raw_max;
    x_max = x_lanes[l] > x_max ? x_lanes[l] : x_max;
  }
  for (; i < vocab_shard; ++i) {
    const float r = row.raw[i];
    is_bad |= !(r < inf);
    raw_max = r > raw_max ? r : raw_max;
    x_max = row.x[i] > x_max ? row.x[i] : x_max;
  }
  Candidate best;  // the first token at x_max: ties to the lowest id
  int64_t first = 0;  // whole chunks of lanes without x_max are passed over at once
  for (; x_max > kNegInf && first + kLanes <= vocab_shard; first += kLanes) {
    Lanes x;
    std::memcpy(&x, row.x + first, sizeof x);
    const Mask at_max = x == x_max;
    bool any = false;
    for (int64_t l = 0; l < kLanes; ++l) any |= at_max[l] != 0;
    if (any) break;
  }
  for (int64_t i = first; i < vocab_shard && x_max > kNegInf; ++i) {
    if (row.x[i] == x_max) {
      best = Candidate{x_max, row.raw[i], static_cast<int32_t>(vocab_begin + i)};
      break;
    }
  }
  row.local_best = best;
  packer.PushFloat(is_bad ? 0.0f : raw_max);
  packer.PushFloat(is_bad ? 1.0f : 0.0f);
  PushCandidate(packer, best);
  if (row.use_top_k) {
    for (const Candidate& c : LocalTop(row.x, row.raw, vocab_begin, vocab_shard, row.top_k)) PushCandidate(packer, c);
  }
  if (row.num_logprobs > 0) {
    for (const Candidate& c : LocalTop(row.raw, row.raw, vocab_begin, vocab_shard, row.num_logprobs)) {
      PushCandidate(packer, c);
    }
  }
}

void UnpackRound1(const std::vector<float>& gathered, int num_ranks, std::vector<SamplingRow>& rows) {
  const size_t per_rank = gathered.size() / static_cast<size_t>(num_ranks);
  std::vector<std::vector<Candidate>> top_k_union(rows.size()), top_n_union(rows.size());
  for (int r = 0; r < num_ranks; ++r) {
    FloatUnpacker in(gathered.data() + per_rank * static_cast<size_t>(r), per_rank);
    for (size_t s = 0; s < rows.size(); ++s) {
      SamplingRow& row = rows[s];
      const float raw_max = in.PopFloat();
      row.is_bad |= in.PopFloat() != 0.0f;
      row.raw_max = std::max(row.raw_max, raw_max);
      const Candidate best = PopCandidate(in);
      if (Before(best, row.best)) row.best = best;
      for (int32_t i = 0; i < row.top_k; ++i) top_k_union[s].push_back(PopCandidate(in));
      for (int32_t i = 0; i < row.num_logprobs; ++i) top_n_union[s].push_back(PopCandidate(in));
    }
    CHECK_EQ(in.position(), per_rank);
  }
  for (size_t s = 0; s < rows.size(); ++s) {
    rows[s].top_k_set = BestOf(std::move(top_k_union[s]), static_cast<size_t>(rows[s].top_k));
    rows[s].top_logprobs = BestOf(std::move(top_n_union[s]), static_cast<size_t>(rows[s].num_logprobs));
  }
}

void PackRound2(const SamplingRow& row, int64_t vocab_begin, int64_t vocab_shard, FloatPacker& packer) {
  if (row.needs_log_sum_exp) packer.PushDouble(SumExp(row.raw, vocab_shard, row.raw_max));
  if (row.is_greedy || row.use_top_k) return;
  const float m = row.best.value;
  const auto survives = [&](float x) { return x > kNegInf && (!row.use_min_p || PassesMinP(x, m, row.log_min_p)); };
  if (row.use_top_p) {
    uint128 sum = 0;
    for (int64_t i = 0; i < vocab_shard; ++i) {
      if (survives(row.x[i])) sum += SamplingWeight(row.x[i], m);
    }
    packer.PushU128(sum);
    return;
  }
  const SamplingParams& p = *row.params;
  GumbelDraw draw;
  // Start from the local maximum so that most tokens are excluded cheaply.
  if (row.local_best.id >= 0 && survives(row.local_best.value)) draw.Offer(row.local_best, p.seed, row.plan->sample_index);
  // Blocks of tokens: their random bits in one vectorised call, then the cheap bounds, and the
  // logarithms only for the few tokens that could still win.
  constexpr int kBlock = 64;
  uint64_t bits[kBlock];
  for (int64_t begin = 0; begin < vocab_shard; begin += kBlock) {
    const int n = static_cast<int>(std::min<int64_t>(kBlock, vocab_shard - begin));
    bool any_left = false;
    for (int j = 0; j < n; ++j) any_left |= survives(row.x[begin + j]) && !draw.Excludes(row.x[begin + j]);
    if (!any_left) continue;
    CounterBitsForRange(p.seed, row.plan->sample_index, static_cast<int32_t>(vocab_begin + begin), n, bits);
    for (int j = 0; j < n; ++j) {
      const int64_t i = begin + j;
      if (!survives(row.x[i])) continue;
      draw.OfferWithBits(Candidate{row.x[i], row.raw[i], static_cast<int32_t>(vocab_begin + i)}, bits[j]);
    }
  }
  packer.PushDouble(draw.score);
  packer.PushFloat(draw.raw);
  packer.PushU32(static_cast<uint32_t>(draw.id + 1));
}

void UnpackRound2(const std::vector<float>& gathered, int num_ranks, std::vector<SamplingRow>& rows) {
  const size_t per_rank = gathered.size() / static_cast<size_t>(num_ranks);
  std::vector<double> raw_sums(rows.size(), 0.0);
  for (int r = 0; r < num_ranks; ++r) {
    FloatUnpacker in(gathered.data() + per_rank * static_cast<size_t>(r), per_rank);
    for (size_t s = 0; s < rows.size(); ++s) {
      SamplingRow& row = rows[s];
      if (row.needs_log_sum_exp) raw_sums[s] += in.PopDouble();  // in rank order: the same bits on every rank
      if (row.is_greedy || row.use_top_k) continue;
      if (row.use_top_p) {
        row.nucleus_total += in.PopU128();
        continue;
      }
      GumbelDraw local;
      local.score = in.PopDouble();
      local.raw = in.PopFloat();
      local.id = static_cast<int32_t>(in.PopU32()) - 1;
      if (local.id >= 0 && (local.score > row.draw.score ||
                            (local.score == row.draw.score &&
                             static_cast<uint32_t>(local.id) < static_cast<uint32_t>(row.draw.id)))) {
        row.draw = local;
      }
    }
    CHECK_EQ(in.position(), per_rank);
  }
  for (size_t s = 0; s < rows.size(); ++s) {
    if (!rows[s].needs_log_sum_exp) continue;
    rows[s].log_sum_exp = static_cast<double>(rows[s].raw_max) + PortableLog(raw_sums[s]);  // sum >= 1: the max's term
  }
}

}  // namespace tpserve::sampling
