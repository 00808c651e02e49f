#include "kernels/cpu/paged_attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "common/check.h"
#include "kernels/cpu/isa_kernels.h"

namespace tpserve {
namespace {

// The most query heads one item attends for (grouped-query models share a KV head among 4 to 8).
constexpr int64_t kMaxGroupHeads = 16;

// Per-thread buffers of AttendGroup: the scores of each head, and (other cache types than F32) one
// block of dequantised keys or values.
struct AttendScratch {
  std::vector<float> scores, rows;
};

// One token and a group of the query heads that read one KV head: each block of keys, then of values,
// is fetched (and dequantised) once and used by every head of the group while it is in L1.
struct AttendItem {
  int64_t t;
  int64_t kv_head;
  const int32_t* heads;  // the group's query heads
  int64_t num_heads;
};

// Each (token, head) of the item: two passes over the keys first..p in position order (first = 0, or
// the window's start). Scores q·k in the canonical 16-lane order of the active level's dot_rows
// (kernels/cpu/simd/canonical_dot.cc), softmax by its exp_scores (PortableExpF, the sum in position
// order), values accumulated element-wise in position order by its accumulate_rows. A cache of another
// type is read through the level's dequantize_kv_row into the same arithmetic. The heads share loads,
// never arithmetic: a head's result is the same in any group.
void AttendGroup(const PagedAttentionArgs& a, const AttendItem& item, AttendScratch* scratch) {
  const internal::IsaKernels& kernels = internal::ActiveKernels();
  const int64_t D = a.head_dim, bs = a.block_size, t = item.t, g = item.num_heads;
  const int64_t end = static_cast<int64_t>(a.positions[t]) + 1;  // keys [first, end)
  const int64_t first = a.sliding_window > 0 ? std::max<int64_t>(0, end - a.sliding_window) : 0;
  const int64_t num_keys = end - first;
  const int32_t* table = a.block_tables + static_cast<int64_t>(a.token_seq[t]) * a.max_blocks_per_seq;
  const bool direct = a.kv_dtype == DType::kF32;
  const int64_t row_bytes = DTypeRowBytes(a.kv_dtype, D);
  // Position j's row of the item's KV head inside a cache [num_blocks, bs, Hkv] of rows.
  auto row = [&](const void* cache, int64_t j) {
    const int64_t block = table[j / bs];
    return static_cast<const uint8_t*>(cache) + ((block * bs + j % bs) * a.num_kv_heads + item.kv_head) * row_bytes;
  };
  if (static_cast<int64_t>(scratch->scores.size()) < g * num_keys) scratch->scores.resize(g * num_keys);
  if (!direct) scratch->rows.resize(bs * D);
  auto scores = [&](int64_t i) { return scratch->scores.data() + i * num_keys; };
  auto query = [&](int64_t i) { return a.q + (t * a.num_heads + item.heads[i]) * D; };
  auto output = [&](int64_t i) { return a.out + (t * a.num_heads + item.heads[i]) * D; };
  // Rows [j, j + rows) of one block of `cache` as f32, *stride floats apart: in place for an F32 cache,
  // else dequantised into the scratch rows. A block's rows of one KV head lie Hkv rows apart, a stride the
  // hardware prefetcher does not follow: the next block's rows are asked for while this one is used
  // (tpserve-bench-attention, 1B shape over 4096 positions: about 1.25x faster with).
  // Positions j..j + rows stay inside one block (j's), so their rows are a fixed byte stride apart.
  const int64_t row_stride = a.num_kv_heads * row_bytes;
  auto block_rows = [&](const void* cache, int64_t j, int64_t rows, int64_t* stride) -> const float* {
    const int64_t next = j + rows;  // the next block's first position
    if (next < end) {
      const uint8_t* p = row(cache, next);
      for (int64_t r = 0; r < std::min(bs, end - next); ++r, p += row_stride) {
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
  // A block's positions are contiguous in the cache (stride Hkv rows): one dot_rows call per block and head.
  for (int64_t j = first; j < end;) {
    const int64_t rows = std::min(bs - j % bs, end - j);
    int64_t stride = 0;
    const float* k = block_rows(a.k_cache, j, rows, &stride);
    for (int64_t i = 0; i < g; ++i) kernels.dot_rows(query(i), k, stride, rows, D, scores(i) + (j - first));
    j += rows;
  }
  float inv_sum[kMaxGroupHeads];
  kernels.exp_scores(scores(0), g, num_keys, a.scale, inv_sum);
  for (int64_t i = 0; i < g; ++i) {
    inv_sum[i] = 1.0f / inv_sum[i];
    std::memset(output(i), 0, D * sizeof(float));
  }
  for (int64_t j = first; j < end;) {
    const int64_t rows = std::min(bs - j % bs, end - j);
    int64_t stride = 0;
    const float* v = block_rows(a.v_cache, j, rows, &stride);
    for (int64_t i = 0; i < g; ++i) kernels.accumulate_rows(scores(i) + (j - first), v, stride, rows, D, output(i));
    j += rows;
  }
  for (int64_t i = 0; i < g; ++i) {
    float* out = output(i);
    for (int64_t e = 0; e < D; ++e) out[e] *= inv_sum[i];
  }
}

// The items of a batch: per token, per KV head, its query heads in groups as large as still give every
// thread an item (GQA models read each KV block once per group instead of once per head).
struct AttendPlan {
  std::vector<int32_t> heads_by_kv;  // the query heads of KV head 0, then of 1, ..., each in head order
  std::vector<AttendItem> items;     // pointing into heads_by_kv
};

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
  int64_t group = min_heads;
  while (group > 1 && a.num_tokens * a.num_kv_heads * ((min_heads + group - 1) / group) < threads) --group;
  for (int64_t t = 0; t < a.num_tokens; ++t) {
    for (int64_t kvh = 0; kvh < a.num_kv_heads; ++kvh) {
      for (int64_t h = kv_begin[kvh]; h < kv_begin[kvh + 1]; h += group) {
        plan.items.push_back({t, kvh, plan.heads_by_kv.data() + h, std::min(group, kv_begin[kvh + 1] - h)});
      }
    }
  }
  return plan;
}

}  // namespace

void PagedAttention(const PagedAttentionArgs& args, ThreadPool* pool) {
  CHECK(pool != nullptr);
  CHECK_GT(args.block_size, 0);
  CHECK_GT(args.num_kv_heads, 0);
  CHECK_EQ(args.head_dim % DTypeBlockElems(args.kv_dtype), 0) << DTypeName(args.kv_dtype);
  for (int64_t t = 0; t < args.num_tokens; ++t) {
    CHECK_GE(args.positions[t], 0);
    CHECK_LE((static_cast<int64_t>(args.positions[t]) + args.block_size) / args.block_size, args.max_blocks_per_seq)
        << "token " << t << " at position " << args.positions[t] << " is past its block table";
  }
  const AttendPlan plan = MakePlan(args, pool->num_threads());
  const std::vector<AttendItem>& items = plan.items;
  // Items are dealt round-robin: within a prefill chunk later tokens attend to more keys, so
  // contiguous ranges would leave the first thread idle. Which thread runs an item never changes
  // its arithmetic.
  const int64_t num_items = static_cast<int64_t>(items.size());
  const int64_t lanes = std::min<int64_t>(num_items, pool->num_threads());
  pool->ParallelFor(lanes, [&](int64_t begin, int64_t end) {
    thread_local AttendScratch scratch;
    for (int64_t lane = begin; lane < end; ++lane) {
      for (int64_t i = lane; i < num_items; i += lanes) AttendGroup(args, items[i], &scratch);
    }
  });
}

}  // namespace tpserve
