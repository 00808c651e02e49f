#include "kernels/cpu/paged_attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "common/check.h"
#include "kernels/cpu/isa_kernels.h"
#include "kernels/cpu/portable_math.h"

namespace tpserve {
namespace {

// out[n] += w * v[n], each element on its own.
inline void Axpy(float w, const float* v, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] += w * v[i];
}

// Per-thread buffers of AttendOne: the scores, and (other cache types than F32) one block of
// dequantised keys and one value row.
struct AttendScratch {
  std::vector<float> scores, keys, value;
};

// One (token, head): two passes over the keys first..p in position order (first = 0, or the window's start).
// Scores q·k in the canonical 16-lane order of the active level's dot_rows (kernels/cpu/simd/canonical_dot.cc),
// softmax with PortableExpF in position order, values accumulated element-wise in position order. A cache
// of another type is read through the level's dequantize_kv_row into the same arithmetic.
void AttendOne(const PagedAttentionArgs& a, int64_t t, int64_t h, AttendScratch* scratch) {
  const internal::IsaKernels& kernels = internal::ActiveKernels();
  const int64_t D = a.head_dim, bs = a.block_size;
  const int64_t kvh = a.kv_head_of_q[h];
  const int64_t end = static_cast<int64_t>(a.positions[t]) + 1;  // keys [first, end)
  const int64_t first = a.sliding_window > 0 ? std::max<int64_t>(0, end - a.sliding_window) : 0;
  const int64_t num_keys = end - first;
  const int32_t* table = a.block_tables + static_cast<int64_t>(a.token_seq[t]) * a.max_blocks_per_seq;
  const float* q = a.q + (t * a.num_heads + h) * D;
  float* out = a.out + (t * a.num_heads + h) * D;
  const bool direct = a.kv_dtype == DType::kF32;
  const int64_t row_bytes = DTypeRowBytes(a.kv_dtype, D);
  // Position j's row of head kvh inside a cache [num_blocks, bs, Hkv] of rows.
  auto row = [&](const void* cache, int64_t j) {
    const int64_t block = table[j / bs];
    return static_cast<const uint8_t*>(cache) + ((block * bs + j % bs) * a.num_kv_heads + kvh) * row_bytes;
  };
  if (static_cast<int64_t>(scratch->scores.size()) < num_keys) scratch->scores.resize(num_keys);
  float* s = scratch->scores.data();
  if (!direct) {
    scratch->keys.resize(bs * D);
    scratch->value.resize(D);
  }
  float max = -INFINITY;
  // A block's positions are contiguous in the cache (stride Hkv rows): one dot_rows call per block.
  for (int64_t j = first; j < end;) {
    const int64_t rows = std::min(bs - j % bs, end - j);
    if (direct) {
      kernels.dot_rows(q, reinterpret_cast<const float*>(row(a.k_cache, j)), a.num_kv_heads * D, rows, D,
                       s + (j - first));
    } else {
      for (int64_t r = 0; r < rows; ++r) {
        kernels.dequantize_kv_row(a.kv_dtype, row(a.k_cache, j + r), D, scratch->keys.data() + r * D);
      }
      kernels.dot_rows(q, scratch->keys.data(), D, rows, D, s + (j - first));
    }
    j += rows;
  }
  for (int64_t j = 0; j < num_keys; ++j) {
    s[j] *= a.scale;
    max = std::fmax(max, s[j]);
  }
  float sum = 0.0f;
  for (int64_t j = 0; j < num_keys; ++j) {
    s[j] = PortableExpF(s[j] - max);
    sum += s[j];
  }
  std::memset(out, 0, D * sizeof(float));
  for (int64_t j = 0; j < num_keys; ++j) {
    const uint8_t* v = row(a.v_cache, first + j);
    if (!direct) kernels.dequantize_kv_row(a.kv_dtype, v, D, scratch->value.data());
    Axpy(s[j], direct ? reinterpret_cast<const float*>(v) : scratch->value.data(), D, out);
  }
  const float inv = 1.0f / sum;
  for (int64_t i = 0; i < D; ++i) out[i] *= inv;
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
  // Items are dealt round-robin: within a prefill chunk later tokens attend to more keys, so
  // contiguous ranges would leave the first thread idle. Which thread runs an item never changes
  // its arithmetic.
  const int64_t items = args.num_tokens * args.num_heads;
  const int64_t lanes = std::min<int64_t>(items, pool->num_threads());
  pool->ParallelFor(lanes, [&](int64_t begin, int64_t end) {
    thread_local AttendScratch scratch;
    for (int64_t lane = begin; lane < end; ++lane) {
      for (int64_t i = lane; i < items; i += lanes) AttendOne(args, i / args.num_heads, i % args.num_heads, &scratch);
    }
  });
}

}  // namespace tpserve
