#include "kernels/cpu/paged_attention.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <utility>
#include <vector>

#include "common/check.h"
#include "kernels/cpu/isa_kernels.h"

namespace tpserve {
namespace {

// The most query heads one item attends for (grouped-query models share a KV head among 4 to 8).
constexpr int64_t kMaxGroupHeads = 16;

// Per-thread buffers of AttendGroup: the scores of each token and head, and (other cache types than F32)
// one block of dequantised keys or values.
struct AttendScratch {
  std::vector<float> scores, rows;
};

// The most tokens of one item: a prefill's consecutive tokens of one sequence read the same KV blocks, so
// an item takes a run of them and each block is fetched once for the run instead of once per token.
// (SmolLM2 pp2048 at 2 threads, 8 → 16: 738-760 → 789-798 tok/s, pp512 alike; 32: 775-780.)
constexpr int64_t kMaxItemTokens = 16;

// A run of tokens [t, t + num_tokens) of one sequence and a group of the query heads that read one KV
// head: each block of keys, then of values, is fetched (and dequantised) once and used by every token and
// head of the item while it is in L1.
struct AttendItem {
  int64_t t;
  int64_t num_tokens;
  int64_t kv_head;
  const int32_t* heads;  // the group's query heads
  int64_t num_heads;
};

// Each (token, head) of the item: two passes over its keys first..p in position order (first = 0, or
// the window's start). Scores q·k in the canonical 16-lane order of the active level's dot_rows
// (kernels/cpu/simd/canonical_dot.cc), softmax by its exp_scores (PortableExpF, the sum in the same 16
// lanes and fold), values accumulated element-wise in position order by its accumulate_rows (one fma per value,
// a token's heads together). A cache of another type is read through the level's dequantize_kv_row into
// the same arithmetic. Tokens and heads share loads, never arithmetic: a (token, head)'s result is the
// same in any item.
void AttendGroup(const PagedAttentionArgs& a, const AttendItem& item, AttendScratch* scratch) {
  const internal::IsaKernels& kernels = internal::ActiveKernels();
  const int64_t D = a.head_dim, bs = a.block_size, n = item.num_tokens, g = item.num_heads;
  // Token i of the run attends keys [first[i], end[i]); its g rows of scores start at base[i].
  int64_t first[kMaxItemTokens], end[kMaxItemTokens], base[kMaxItemTokens + 1] = {0};
  int64_t lo = INT64_MAX, hi = 0;  // the union of the tokens' keys
  for (int64_t i = 0; i < n; ++i) {
    end[i] = static_cast<int64_t>(a.positions[item.t + i]) + 1;
    first[i] = a.sliding_window > 0 ? std::max<int64_t>(0, end[i] - a.sliding_window) : 0;
    base[i + 1] = base[i] + g * (end[i] - first[i]);
    lo = std::min(lo, first[i]);
    hi = std::max(hi, end[i]);
  }
  const int32_t* table = a.block_tables + static_cast<int64_t>(a.token_seq[item.t]) * a.max_blocks_per_seq;
  const bool direct = a.kv_dtype == DType::kF32;
  const int64_t row_bytes = DTypeRowBytes(a.kv_dtype, D);
  // Position j's row of the item's KV head inside a cache [num_blocks, bs, Hkv] of rows.
  auto row = [&](const void* cache, int64_t j) {
    const int64_t block = table[j / bs];
    return static_cast<const uint8_t*>(cache) + ((block * bs + j % bs) * a.num_kv_heads + item.kv_head) * row_bytes;
  };
  if (static_cast<int64_t>(scratch->scores.size()) < base[n]) scratch->scores.resize(base[n]);
  if (!direct) scratch->rows.resize(bs * D);
  auto scores = [&](int64_t i, int64_t h) { return scratch->scores.data() + base[i] + h * (end[i] - first[i]); };
  auto query = [&](int64_t i, int64_t h) { return a.q + ((item.t + i) * a.num_heads + item.heads[h]) * D; };
  auto output = [&](int64_t i, int64_t h) { return a.out + ((item.t + i) * a.num_heads + item.heads[h]) * D; };
  // Rows [j, j + rows) of one block of `cache` as f32, *stride floats apart: in place for an F32 cache,
  // else dequantised into the scratch rows. A block's rows of one KV head lie Hkv rows apart, a stride the
  // hardware prefetcher does not follow: the next block's rows are asked for while this one is used
  // (tpserve-bench-attention, 1B shape over 4096 positions: about 1.25x faster with).
  // Positions j..j + rows stay inside one block (j's), so their rows are a fixed byte stride apart.
  const int64_t row_stride = a.num_kv_heads * row_bytes;
  auto block_rows = [&](const void* cache, int64_t j, int64_t rows, int64_t* stride) -> const float* {
    const int64_t next = j + rows;  // the next block's first position
    if (next < hi) {
      const uint8_t* p = row(cache, next);
      for (int64_t r = 0; r < std::min(bs, hi - next); ++r, p += row_stride) {
        for (int64_t off = 0; off < row_bytes; off += 64) __builtin_prefetch(p + off);
      }
    }
    const uint8_t* first_row = row(cache, j);
    if (direct) {
      *stride = a.num_kv_heads * D;
      return reinterpret_cast<const float*>(first_row);
    }
    for (int64_t r = 0; r < rows; ++r) {
      kernels.dequantize_kv_row(a.kv_dtype, first_row + r * row_stride, D, scratch->rows.data() + r * D);
    }
    *stride = D;
    return scratch->rows.data();
  };
  // Each block of the union once (its positions are contiguous in the cache, stride Hkv rows), with
  // fn(j, rows, block, stride): positions [j, j + rows), block is position j's row.
  auto for_blocks = [&](const void* cache, auto fn) {
    for (int64_t j = lo; j < hi;) {
      const int64_t rows = std::min(bs - j % bs, hi - j);
      int64_t stride = 0;
      const float* block = block_rows(cache, j, rows, &stride);
      fn(j, rows, block, stride);
      j += rows;
    }
  };
  // Token i's keys among positions [j, j + rows): [from, to), empty when from >= to.
  auto keys_in = [&](int64_t i, int64_t j, int64_t rows) {
    return std::pair{std::max(j, first[i]), std::min(j + rows, end[i])};
  };
  // A whole block every token of the item attends all of (a prefill's blocks but its last): each token and head
  // reads the block's rows [0, bs) and writes its scores (weights) from position j on, so the block after it
  // takes the same lists with every score pointer bs further. (Building the lists anew per block was most of this
  // function's own time: 4 % of a SmolLM2 pp512 at two threads.)
  int64_t first_max = 0, end_min = INT64_MAX;
  for (int64_t i = 0; i < n; ++i) {
    first_max = std::max(first_max, first[i]);
    end_min = std::min(end_min, end[i]);
  }
  auto whole = [&](int64_t j, int64_t rows) { return rows == bs && j >= first_max && j + rows <= end_min; };
  // Scores: every token and head of the item against a block in one call.
  internal::QueryScores queries[kMaxItemTokens * kMaxGroupHeads];
  int64_t num_queries = 0, listed = -1;  // listed: the whole block the lists were made for, or -1
  for_blocks(a.k_cache, [&](int64_t j, int64_t rows, const float* block, int64_t stride) {
    if (listed >= 0 && whole(j, rows) && j == listed + bs) {
      for (int64_t c = 0; c < num_queries; ++c) queries[c].out += bs;
    } else {
      num_queries = 0;
      for (int64_t i = 0; i < n; ++i) {
        const auto [from, to] = keys_in(i, j, rows);
        for (int64_t h = 0; h < g && from < to; ++h) {
          queries[num_queries++] = {query(i, h), scores(i, h) + (from - first[i]), from - j, to - j};
        }
      }
    }
    listed = whole(j, rows) ? j : -1;
    kernels.dot_rows(queries, num_queries, block, stride, D);
  });
  // The softmax of every row of the item in one call (its rows lie one after another in the scratch).
  int64_t lengths[kMaxItemTokens * kMaxGroupHeads];
  float inv_sum[kMaxItemTokens * kMaxGroupHeads];
  for (int64_t i = 0; i < n; ++i) std::fill_n(lengths + i * g, g, end[i] - first[i]);
  kernels.exp_scores(scores(0, 0), lengths, n * g, a.scale, inv_sum);
  for (int64_t r = 0; r < n * g; ++r) inv_sum[r] = 1.0f / inv_sum[r];
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t h = 0; h < g; ++h) std::memset(output(i, h), 0, D * sizeof(float));
  }
  // Values: the tokens that read the same keys of a block (all of it, but in a prefill's last block) in one
  // call, so that the level takes their heads four at a time.
  const float* w[kMaxItemTokens * kMaxGroupHeads];
  float* out[kMaxItemTokens * kMaxGroupHeads];
  listed = -1;
  for_blocks(a.v_cache, [&](int64_t j, int64_t rows, const float* block, int64_t stride) {
    if (whole(j, rows)) {  // one call for every token and head
      if (listed >= 0 && j == listed + bs) {
        for (int64_t c = 0; c < n * g; ++c) w[c] += bs;
      } else {
        for (int64_t i = 0, c = 0; i < n; ++i) {
          for (int64_t h = 0; h < g; ++h, ++c) {
            w[c] = scores(i, h) + (j - first[i]);
            out[c] = output(i, h);
          }
        }
      }
      listed = j;
      kernels.accumulate_rows(w, n * g, block, stride, rows, D, out);
      return;
    }
    listed = -1;
    for (int64_t i = 0; i < n;) {
      const auto keys = keys_in(i, j, rows);
      int64_t count = 0;
      for (; i < n && keys_in(i, j, rows) == keys; ++i) {
        for (int64_t h = 0; h < g; ++h, ++count) {
          w[count] = scores(i, h) + (keys.first - first[i]);
          out[count] = output(i, h);
        }
      }
      const auto [from, to] = keys;
      if (from < to) kernels.accumulate_rows(w, count, block + (from - j) * stride, stride, to - from, D, out);
    }
  });
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t h = 0; h < g; ++h) {
      float* out = output(i, h);
      for (int64_t e = 0; e < D; ++e) out[e] *= inv_sum[i * g + h];
    }
  }
}

// The items of a batch and the thread lane that runs each. Items are runs of one sequence's consecutive
// tokens, per KV head its query heads in groups. Runs are as long as still give every thread two items
// (later tokens of a prefill attend to more keys), groups as large as still give every thread one (GQA models
// read each KV block once per group instead of once per head, prefills once per run instead of once per
// token); the items are then dealt round-robin. Where there are fewer runs than threads (a decode of one or
// two sequences) and still not two items per thread, whole KV groups would leave threads idle or
// overloaded (SmolLM2 at batch 1: 3 groups of 3 heads on 2 threads, 6 heads against 3), so each run's heads
// in KV-head order are split into one contiguous range per thread instead, and a range into an item per KV
// head it touches (4 heads against 5, each thread reading 2 KV heads).
struct AttendPlan {
  std::vector<int32_t> heads_by_kv;  // the query heads of KV head 0, then of 1, ..., each in head order
  std::vector<AttendItem> items;     // pointing into heads_by_kv, lane by lane
  std::vector<int64_t> lane_begin;   // lane L runs items [lane_begin[L], lane_begin[L + 1])
};

// The runs of at most max_tokens consecutive tokens of one sequence, as (first token, count).
std::vector<std::pair<int64_t, int64_t>> TokenRuns(const PagedAttentionArgs& a, int64_t max_tokens) {
  std::vector<std::pair<int64_t, int64_t>> runs;
  for (int64_t t = 0; t < a.num_tokens; ++t) {
    if (!runs.empty() && runs.back().second < max_tokens && a.token_seq[t] == a.token_seq[runs.back().first]) {
      ++runs.back().second;
    } else {
      runs.push_back({t, 1});
    }
  }
  return runs;
}

// The items of heads [begin, end) of heads_by_kv for one run: one per KV head the range touches (per
// kMaxGroupHeads of its heads: a model with more query heads to a KV head than that, say 32 to 1, split in
// two ranges).
void AddHeadRange(const std::vector<int64_t>& kv_begin, int64_t begin, int64_t end, int64_t t, int64_t count,
                  AttendPlan* plan) {
  for (int64_t kvh = 0; kvh + 1 < static_cast<int64_t>(kv_begin.size()); ++kvh) {
    const int64_t from = std::max(begin, kv_begin[kvh]), to = std::min(end, kv_begin[kvh + 1]);
    for (int64_t h = from; h < to; h += kMaxGroupHeads) {
      plan->items.push_back({t, count, kvh, plan->heads_by_kv.data() + h, std::min(kMaxGroupHeads, to - h)});
    }
  }
}

AttendPlan MakePlan(const PagedAttentionArgs& a, int64_t threads) {
  // Counting sort of the query heads on kv_head_of_q: KV head k's heads are [kv_begin[k], kv_begin[k + 1]).
  std::vector<int64_t> kv_begin(a.num_kv_heads + 1, 0);
  for (int64_t h = 0; h < a.num_heads; ++h) {
    CHECK(a.kv_head_of_q[h] >= 0 && a.kv_head_of_q[h] < a.num_kv_heads) << "query head " << h;
    ++kv_begin[a.kv_head_of_q[h] + 1];
  }
  for (int64_t kvh = 0; kvh < a.num_kv_heads; ++kvh) kv_begin[kvh + 1] += kv_begin[kvh];
  AttendPlan plan;
  plan.heads_by_kv.resize(a.num_heads);
  std::vector<int64_t> fill(kv_begin.begin(), kv_begin.end() - 1);
  for (int64_t h = 0; h < a.num_heads; ++h) plan.heads_by_kv[fill[a.kv_head_of_q[h]]++] = static_cast<int32_t>(h);

  int64_t min_heads = kMaxGroupHeads;
  for (int64_t kvh = 0; kvh < a.num_kv_heads; ++kvh) {
    if (kv_begin[kvh + 1] > kv_begin[kvh]) min_heads = std::min(min_heads, kv_begin[kvh + 1] - kv_begin[kvh]);
  }
  const int64_t wanted = 2 * threads;
  int64_t run_tokens = kMaxItemTokens;
  std::vector<std::pair<int64_t, int64_t>> runs = TokenRuns(a, run_tokens);
  while (run_tokens > 1 && static_cast<int64_t>(runs.size()) * a.num_kv_heads < wanted) {
    run_tokens /= 2;
    runs = TokenRuns(a, run_tokens);
  }
  const int64_t num_runs = static_cast<int64_t>(runs.size());
  if (threads > 1 && num_runs < threads && num_runs * a.num_kv_heads < wanted) {
    for (int64_t lane = 0; lane < threads; ++lane) {
      plan.lane_begin.push_back(static_cast<int64_t>(plan.items.size()));
      for (const auto& [t, count] : runs) {
        const int64_t begin = a.num_heads * lane / threads, end = a.num_heads * (lane + 1) / threads;
        AddHeadRange(kv_begin, begin, end, t, count, &plan);
      }
    }
    plan.lane_begin.push_back(static_cast<int64_t>(plan.items.size()));
    return plan;
  }
  int64_t group = min_heads;
  while (group > 1 && num_runs * a.num_kv_heads * ((min_heads + group - 1) / group) < threads) --group;
  std::vector<AttendItem> items;
  for (const auto& [t, count] : runs) {
    for (int64_t kvh = 0; kvh < a.num_kv_heads; ++kvh) {
      for (int64_t h = kv_begin[kvh]; h < kv_begin[kvh + 1]; h += group) {
        items.push_back({t, count, kvh, plan.heads_by_kv.data() + h, std::min(group, kv_begin[kvh + 1] - h)});
      }
    }
  }
  // Round-robin: within a prefill chunk later tokens attend to more keys, so contiguous ranges would leave
  // the first thread idle.
  const int64_t num_items = static_cast<int64_t>(items.size());
  const int64_t lanes = std::min(num_items, threads);
  for (int64_t lane = 0; lane < lanes; ++lane) {
    plan.lane_begin.push_back(static_cast<int64_t>(plan.items.size()));
    for (int64_t i = lane; i < num_items; i += lanes) plan.items.push_back(items[i]);
  }
  plan.lane_begin.push_back(static_cast<int64_t>(plan.items.size()));
  return plan;
}

}  // namespace

void PagedAttention(const PagedAttentionArgs& args, ThreadPool* pool) {
  CHECK(pool != nullptr);
  CHECK_GT(args.block_size, 0);
  CHECK_GT(args.num_kv_heads, 0);
  CHECK_GT(args.scale, 0.0f);  // exp_scores scales after taking the max
  CHECK_EQ(args.head_dim % DTypeBlockElems(args.kv_dtype), 0) << DTypeName(args.kv_dtype);
  for (int64_t t = 0; t < args.num_tokens; ++t) {
    CHECK_GE(args.positions[t], 0);
    CHECK_LE((static_cast<int64_t>(args.positions[t]) + args.block_size) / args.block_size, args.max_blocks_per_seq)
        << "token " << t << " at position " << args.positions[t] << " is past its block table";
  }
  const AttendPlan plan = MakePlan(args, pool->num_threads());
  // Which lane runs an item never changes its arithmetic.
  const int64_t lanes = static_cast<int64_t>(plan.lane_begin.size()) - 1;
  pool->ParallelFor(lanes, [&](int64_t begin, int64_t end) {
    thread_local AttendScratch scratch;
    for (int64_t lane = begin; lane < end; ++lane) {
      for (int64_t i = plan.lane_begin[lane]; i < plan.lane_begin[lane + 1]; ++i) {
        AttendGroup(args, plan.items[i], &scratch);
      }
    }
  });
}

}  // namespace tpserve
