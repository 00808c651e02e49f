// The distributed sampler. Each rank works on its vocabulary slice; what crosses ranks per row is
// a handful of numbers plus the candidates of the filters (k for top-k, the local nucleus for
// top-p, num_logprobs for top_logprobs). The rounds, each one AllGather for the whole batch:
//   1. maxima: the raw max (for the log-sum-exp), the processed argmax (greedy rows; the m of
//      min-p and top-p), local top-k and top-logprob candidates. Greedy and top-k rows are now
//      decided: every rank holds a superset of their allowed set and can draw Gumbels for any id.
//   2. sums: the raw sum of exp(x - max) (log-sum-exp, double); for the other sampling rows either the local
//      Gumbel winner (no top-p) or the local weight sum of the tokens left after min-p (top-p).
//   3. (top-p rows without top-k only) how many local nucleus candidates each rank has;
//   4. those candidates. Any token of the global nucleus is in its rank's local nucleus, because
//      the weights before it on its own rank are a part of those before it globally.
#include "worker/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "worker/counter_rng.h"
#include "worker/float_packing.h"
#include "worker/logits_processor.h"
#include "worker/sampling_weight.h"
#include "worker/sum_exp.h"

namespace tpserve {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// A token on its way through the filters.
struct Candidate {
  float value = kNegInf;  // processed logit (steps 1-4 of sampler.h)
  float raw = kNegInf;    // unmodified logit, for the logprob
  int32_t id = -1;        // -1: padding
};

// Descending value, ties to the lower id, padding last.
bool Before(const Candidate& a, const Candidate& b) {
  if (a.value != b.value) return a.value > b.value;
  return static_cast<uint32_t>(a.id) < static_cast<uint32_t>(b.id);
}

void PushCandidate(FloatPacker& packer, const Candidate& c) {
  packer.PushFloat(c.value);
  packer.PushFloat(c.raw);
  packer.PushU32(static_cast<uint32_t>(c.id + 1));
}

Candidate PopCandidate(FloatUnpacker& unpacker) {
  Candidate c;
  c.value = unpacker.PopFloat();
  c.raw = unpacker.PopFloat();
  c.id = static_cast<int32_t>(unpacker.PopU32()) - 1;
  return c;
}

// The Gumbel-max winner so far.
struct Draw {
  double score = -std::numeric_limits<double>::infinity();
  int32_t id = -1;
  float raw = kNegInf;

  // Offers token c with its Gumbel draw; ties go to the lower id. Most tokens of a large
  // vocabulary lose by a margin that the cheap bounds show without the draw's logarithms.
  void Offer(const Candidate& c, uint64_t seed, uint32_t sample_index) {
    if (Excludes(c.value)) return;
    OfferWithBits(c, CounterBits(seed, sample_index, c.id));
  }
  // The same, with c's CounterBits already drawn.
  void OfferWithBits(const Candidate& c, uint64_t bits) {
    const double x = static_cast<double>(c.value);
    if (x + GumbelUpperBound(bits) < score) return;
    const double score_c = x + GumbelFromBits(bits);
    if (score_c > score || (score_c == score && static_cast<uint32_t>(c.id) < static_cast<uint32_t>(id))) {
      score = score_c;
      id = c.id;
      raw = c.raw;
    }
  }
  // True when a token of processed logit x cannot beat the winner whatever its draw.
  bool Excludes(float x) const { return static_cast<double>(x) + kMaxGumbel < score; }
};

// The n best finite tokens of a slice (Before order), padded to n. values/raw: [V_shard].
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

bool PassesMinP(float x, float m, double log_min_p) {
  return static_cast<double>(x) - static_cast<double>(m) >= log_min_p;
}

// One row of the batch and everything the rounds learn about it.
struct Row {
  const SequencePlan* plan = nullptr;
  const SamplingParams* params = nullptr;
  bool is_greedy = false;
  bool use_top_k = false;
  bool use_min_p = false;
  bool use_top_p = false;
  int32_t top_k = 0;
  int32_t num_logprobs = 0;
  double log_min_p = 0;
  const float* raw = nullptr;    // [V_shard] unmodified logits
  const float* x = nullptr;      // [V_shard] processed logits (== raw when processing is the identity)
  std::vector<float> processed;  // [V_shard] storage behind x, when it is not raw

  // Round 1.
  Candidate local_best;     // this rank's processed argmax
  bool is_bad = false;      // a NaN or +inf raw logit on some rank
  float raw_max = kNegInf;  // global
  Candidate best;           // global processed argmax
  std::vector<Candidate> top_k_set;     // top-k rows: the global top-k, Before order
  std::vector<Candidate> top_logprobs;  // the global top num_logprobs raw logits (value = raw)
  // Round 2.
  double log_sum_exp = 0;  // of the raw logits
  uint128 nucleus_total = 0;
  // Rounds 3-4.
  std::vector<Candidate> local_nucleus;
  // The outcome.
  Draw draw;

  bool NeedsNucleusRounds() const { return !is_greedy && !use_top_k && use_top_p; }
};

Status CheckFinite(float v, const char* name) {
  if (std::isnan(v) || std::isinf(v)) return InvalidArgument(std::string(name) + " must be finite");
  return OkStatus();
}

StatusOr<std::vector<float>> AllGatherPayload(Communicator& comm, const FloatPacker& packer) {
  std::vector<float> gathered(packer.size() * static_cast<size_t>(comm.size()));
  if (packer.size() > 0) RETURN_IF_ERROR(comm.AllGather(packer.data().data(), packer.size(), gathered.data()));
  return gathered;
}

void PrepareRow(Row& row, const float* raw, int64_t vocab_begin, int64_t vocab_shard, int64_t vocab_size) {
  const SamplingParams& p = *row.params;
  row.is_greedy = p.is_greedy();
  row.use_top_k = !row.is_greedy && p.top_k > 0 && p.top_k < vocab_size;
  row.use_min_p = !row.is_greedy && p.min_p > 0.0f;
  row.use_top_p = !row.is_greedy && p.top_p < 1.0f;
  row.top_k = row.use_top_k ? p.top_k : 0;
  row.num_logprobs = static_cast<int32_t>(std::min<int64_t>(p.num_logprobs, vocab_size));
  row.log_min_p = row.use_min_p ? std::log(static_cast<double>(p.min_p)) : 0.0;
  row.raw = raw;
  if (ProcessLogitsIsIdentity(p)) {
    row.x = raw;
  } else {
    row.processed.resize(static_cast<size_t>(vocab_shard));
    ProcessLogits(raw, vocab_begin, vocab_shard, p, row.plan->penalty_tokens, row.processed.data());
    row.x = row.processed.data();
  }
}

// Round 1 payload of one row: [raw max, bad flag, processed argmax, top-k, top-logprobs].
void PackRound1(Row& row, int64_t vocab_begin, int64_t vocab_shard, FloatPacker& packer) {
  // Plain loops the compiler vectorises: this runs over every logit of every row.
  float raw_max = kNegInf;
  bool is_bad = false;
  float x_max = kNegInf;
  for (int64_t i = 0; i < vocab_shard; ++i) {
    const float r = row.raw[i];
    is_bad |= (r != r) | (r == std::numeric_limits<float>::infinity());
    raw_max = r > raw_max ? r : raw_max;
    x_max = row.x[i] > x_max ? row.x[i] : x_max;
  }
  Candidate best;  // the first token at x_max: ties to the lowest id
  for (int64_t i = 0; i < vocab_shard && x_max > kNegInf; ++i) {
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

// Keeps the best n of candidates (Before order), dropping padding.
std::vector<Candidate> BestOf(std::vector<Candidate> candidates, size_t n) {
  std::sort(candidates.begin(), candidates.end(), Before);
  while (!candidates.empty() && candidates.back().id < 0) candidates.pop_back();
  if (candidates.size() > n) candidates.resize(n);
  return candidates;
}

void UnpackRound1(const std::vector<float>& gathered, int num_ranks, std::vector<Row>& rows) {
  const size_t per_rank = gathered.size() / static_cast<size_t>(num_ranks);
  std::vector<std::vector<Candidate>> top_k_union(rows.size()), top_n_union(rows.size());
  for (int r = 0; r < num_ranks; ++r) {
    FloatUnpacker in(gathered.data() + per_rank * static_cast<size_t>(r), per_rank);
    for (size_t s = 0; s < rows.size(); ++s) {
      Row& row = rows[s];
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

// Min-p, top-p and the draw over a row's allowed set already known to every rank (top-k rows,
// and the gathered nucleus of the others). sorted: Before order.
void DrawFromCandidates(Row& row, const std::vector<Candidate>& sorted, bool apply_filters) {
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

// Round 2 payload of one row: [raw weight sum] + [nucleus weight sum | local Gumbel winner].
void PackRound2(const Row& row, int64_t vocab_begin, int64_t vocab_shard, FloatPacker& packer) {
  packer.PushDouble(SumExp(row.raw, vocab_shard, row.raw_max));
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
  Draw draw;
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

void UnpackRound2(const std::vector<float>& gathered, int num_ranks, std::vector<Row>& rows) {
  const size_t per_rank = gathered.size() / static_cast<size_t>(num_ranks);
  std::vector<double> raw_sums(rows.size(), 0.0);
  for (int r = 0; r < num_ranks; ++r) {
    FloatUnpacker in(gathered.data() + per_rank * static_cast<size_t>(r), per_rank);
    for (size_t s = 0; s < rows.size(); ++s) {
      Row& row = rows[s];
      raw_sums[s] += in.PopDouble();  // in rank order: the same bits on every rank
      if (row.is_greedy || row.use_top_k) continue;
      if (row.use_top_p) {
        row.nucleus_total += in.PopU128();
        continue;
      }
      Draw local;
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
    rows[s].log_sum_exp = static_cast<double>(rows[s].raw_max) + std::log(raw_sums[s]);  // sum >= 1: the max's term
  }
}

// This rank's part of a top-p row's nucleus: its tokens left after min-p, in Before order, while
// the weights before them (on this rank) stay within the global cutoff.
void FindLocalNucleus(Row& row, int64_t vocab_begin, int64_t vocab_shard) {
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

Status NucleusRounds(std::vector<Row>& rows, int64_t vocab_begin, int64_t vocab_shard, Communicator& comm) {
  FloatPacker counts;
  for (Row& row : rows) {
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
  for (const Row& row : rows) {
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

  std::vector<Row> rows(static_cast<size_t>(num_rows));
  FloatPacker round1;
  for (int64_t s = 0; s < num_rows; ++s) {
    Row& row = rows[static_cast<size_t>(s)];
    row.plan = seqs[static_cast<size_t>(s)];
    row.params = &row.plan->sampling;
    PrepareRow(row, logits + s * vocab_shard, vocab_begin, vocab_shard, vocab_size);
    PackRound1(row, vocab_begin, vocab_shard, round1);
  }
  ASSIGN_OR_RETURN(const std::vector<float> gathered1, AllGatherPayload(comm, round1));
  UnpackRound1(gathered1, comm.size(), rows);
  for (int64_t s = 0; s < num_rows; ++s) {
    const Row& row = rows[static_cast<size_t>(s)];
    if (row.is_bad) return Internal("row " + std::to_string(s) + ": NaN or +inf logits");
    if (row.best.id < 0) return InvalidArgument("row " + std::to_string(s) + ": every token is banned");
  }

  FloatPacker round2;
  for (Row& row : rows) {
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
    const Row& row = rows[s];
    CHECK_GE(row.draw.id, 0) << "row " << s << " drew no token";
    SequenceResult& result = results[s];
    result.seq_id = row.plan->seq_id;
    result.token_id = row.draw.id;
    result.logprob = static_cast<float>(static_cast<double>(row.draw.raw) - row.log_sum_exp);
    for (const Candidate& c : row.top_logprobs) {
      result.top_logprobs.push_back({c.id, static_cast<float>(static_cast<double>(c.raw) - row.log_sum_exp)});
    }
  }
  return results;
}

}  // namespace tpserve
