// Attention over a block-paged KV cache for one flattened batch that mixes prefill chunks and
// decode tokens of different sequences, with grouped-query attention.
#pragma once

#include <cstdint>

#include "common/dtype.h"
#include "common/thread_pool.h"

namespace tpserve {

// The cache of one layer on one rank: [num_blocks, block_size, Hkv] rows of D values of kv_dtype (F32,
// F16, BF16, or Q8_0: D / 32 ggml blocks) for K and the same for V.
struct PagedAttentionArgs {
  const float* q = nullptr;             // [T, H, D], RoPE applied
  const void* k_cache = nullptr;        // [num_blocks, block_size, Hkv] rows
  const void* v_cache = nullptr;        // [num_blocks, block_size, Hkv] rows
  const int32_t* token_seq = nullptr;   // [T] the token's sequence index s in [0, S)
  const int32_t* positions = nullptr;   // [T] absolute position p: attends keys at 0..p (causal), or at
                                        // p - sliding_window + 1..p

  const int32_t* block_tables = nullptr;  // [S, max_blocks_per_seq] physical block ids
  const int32_t* kv_head_of_q = nullptr;  // [H] local KV head read by each local query head
  int64_t max_blocks_per_seq = 0;
  int64_t num_tokens = 0;    // T
  int64_t num_heads = 0;     // H
  int64_t num_kv_heads = 0;  // Hkv
  int64_t head_dim = 0;      // D
  int64_t block_size = 0;
  int64_t sliding_window = 0;  // > 0: a token attends the last sliding_window positions (itself included)
  float scale = 1.0f;        // usually 1/sqrt(D)
  DType kv_dtype = DType::kF32;
  float* out = nullptr;      // [T, H, D]
};

// REQUIRES: the K/V of every position attended by token t (see positions) are in the cache
// (WriteKvCache for this step's tokens runs first). Each (token, head) is reduced in the same
// order whatever the batch, so results are batch invariant. A cache of another type than F32 is read
// as f32 attention over its dequantised rows (exact conversions: the same bits at every ISA level).
void PagedAttention(const PagedAttentionArgs& args, ThreadPool* pool);

// Stores this step's keys and values: slot s = block * block_size + offset; a token whose slot is
// negative (padding) is skipped. Other types than F32 are rounded by the reference quantiser
// (common/dtype.h QuantizeRow: round to nearest even; q8_0 as ggml's, per 32 values).
// k, v: [T, Hkv, D], slot_mapping: [T], caches: [num_blocks * block_size, Hkv] rows of kv_dtype.
// REQUIRES: head_dim a multiple of DTypeBlockElems(kv_dtype).
void WriteKvCache(const float* k, const float* v, const int32_t* slot_mapping, int64_t num_tokens,
                  int64_t num_kv_heads, int64_t head_dim, void* k_cache, void* v_cache,
                  DType kv_dtype = DType::kF32);

}  // namespace tpserve
