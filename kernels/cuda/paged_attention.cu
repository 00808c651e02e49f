#include "common/check.h"
#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/dequantize.cuh"
#include "kernels/cuda/ops.h"

namespace tpserve::cuda {
namespace {

// Value d of a cached row, converted as the CPU's dequantize_kv_row converts it: exactly (f32, f16, bf16:
// DequantizeElement), or as one IEEE product d · q (q8_0, d its block's f16 scale), reading only the
// value's scale and byte rather than decoding its whole block.
__device__ __forceinline__ float KvValue(DType type, const uint8_t* row, int64_t d) {
  if (type != DType::kQ8_0) return DequantizeElement(type, row, d);
  const uint8_t* block = row + (d / kQuantBlock) * sizeof(BlockQ8_0);
  const float scale = LoadHalf(block + offsetof(BlockQ8_0, d));
  const auto q = static_cast<int8_t>(block[offsetof(BlockQ8_0, qs) + d % kQuantBlock]);
  return __fmul_rn(scale, static_cast<float>(q));
}

constexpr int kThreads = 128;     // keys per tile, and threads per (token, head)
constexpr int kMaxDimPerThread = 2;  // head_dim <= kThreads * kMaxDimPerThread

// One block per (token, head): online softmax over tiles of kThreads keys in position order, from the
// first key of the token's window (0 without one).
// Thread j of a tile scores key j; then each thread owns output dims d = tid, tid + kThreads and
// folds the tile's values in key order. Every (token, head) runs the same sequence whatever the batch.
// row_bytes: one cached row of D values of a.kv_dtype (DTypeRowBytes).
__global__ void PagedAttentionKernel(PagedAttentionArgs a, int64_t row_bytes) {
  extern __shared__ float shared[];
  float* q = shared;                  // [D]
  float* probs = shared + a.head_dim;  // [kThreads]
  __shared__ float scratch[32];

  const int64_t t = blockIdx.x / a.num_heads, h = blockIdx.x % a.num_heads;
  const int64_t D = a.head_dim, bs = a.block_size;
  const int64_t kvh = a.kv_head_of_q[h];
  const int64_t num_keys = static_cast<int64_t>(a.positions[t]) + 1;  // keys [first, num_keys)
  const int64_t first = a.sliding_window > 0 && num_keys > a.sliding_window ? num_keys - a.sliding_window : 0;
  const int32_t* table = a.block_tables + static_cast<int64_t>(a.token_seq[t]) * a.max_blocks_per_seq;
  for (int64_t d = threadIdx.x; d < D; d += blockDim.x) q[d] = a.q[(t * a.num_heads + h) * D + d];
  __syncthreads();

  const auto* k_cache = static_cast<const uint8_t*>(a.k_cache);
  const auto* v_cache = static_cast<const uint8_t*>(a.v_cache);
  auto offset = [&](int64_t j) { return ((table[j / bs] * bs + j % bs) * a.num_kv_heads + kvh) * row_bytes; };
  float running_max = -INFINITY, running_sum = 0.0f;
  float acc[kMaxDimPerThread] = {0.0f, 0.0f};
  for (int64_t tile = first; tile < num_keys; tile += kThreads) {
    const int64_t j = tile + threadIdx.x;
    float score = -INFINITY;
    if (j < num_keys) {
      const uint8_t* k = k_cache + offset(j);
      float dot = 0.0f;
      for (int64_t d = 0; d < D; ++d) dot += q[d] * KvValue(a.kv_dtype, k, d);
      score = dot * a.scale;
    }
    const float tile_max = BlockMax(score, scratch);
    const float new_max = fmaxf(running_max, tile_max);
    const float p = j < num_keys ? expf(score - new_max) : 0.0f;
    probs[threadIdx.x] = p;
    const float tile_sum = BlockSum(p, scratch);  // its barriers also publish probs
    const float alpha = expf(running_max - new_max);  // 0 on the first tile
    running_sum = running_sum * alpha + tile_sum;
    running_max = new_max;
    const int64_t tile_keys = num_keys - tile < kThreads ? num_keys - tile : kThreads;
    for (int i = 0; i < kMaxDimPerThread; ++i) {
      const int64_t d = threadIdx.x + i * kThreads;
      if (d >= D) break;
      float sum = acc[i] * alpha;
      for (int64_t jj = 0; jj < tile_keys; ++jj) sum += probs[jj] * KvValue(a.kv_dtype, v_cache + offset(tile + jj), d);
      acc[i] = sum;
    }
    __syncthreads();  // probs is rewritten by the next tile
  }
  for (int i = 0; i < kMaxDimPerThread; ++i) {
    const int64_t d = threadIdx.x + i * kThreads;
    if (d < D) a.out[(t * a.num_heads + h) * D + d] = acc[i] / running_sum;
  }
}

}  // namespace

void PagedAttention(const PagedAttentionArgs& args, cudaStream_t stream) {
  CHECK_LE(args.head_dim, kThreads * kMaxDimPerThread) << "head_dim too large for the CUDA paged attention";
  CHECK_GT(args.block_size, 0);
  const int64_t blocks = args.num_tokens * args.num_heads;
  if (blocks == 0) return;
  const size_t shared_bytes = (args.head_dim + kThreads) * sizeof(float);
  PagedAttentionKernel<<<static_cast<unsigned>(blocks), kThreads, shared_bytes, stream>>>(
      args, DTypeRowBytes(args.kv_dtype, args.head_dim));
  CUDA_CHECK_LAUNCH();
}

}  // namespace tpserve::cuda
