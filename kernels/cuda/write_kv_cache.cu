#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/ops.h"

namespace tpserve::cuda {
namespace {

// One block per token, threads over its [Hkv, D] row.
__global__ void WriteKvCacheKernel(const float* k, const float* v, const int32_t* slot_mapping, int64_t row,
                                   float* k_cache, float* v_cache) {
  const int64_t t = blockIdx.x;
  const int64_t slot = slot_mapping[t];
  if (slot < 0) return;
  for (int64_t i = threadIdx.x; i < row; i += blockDim.x) {
    k_cache[slot * row + i] = k[t * row + i];
    v_cache[slot * row + i] = v[t * row + i];
  }
}

}  // namespace

void WriteKvCache(const float* k, const float* v, const int32_t* slot_mapping, int64_t num_tokens,
                  int64_t num_kv_heads, int64_t head_dim, float* k_cache, float* v_cache, cudaStream_t stream) {
  if (num_tokens == 0) return;
  WriteKvCacheKernel<<<static_cast<unsigned>(num_tokens), 256, 0, stream>>>(
      k, v, slot_mapping, num_kv_heads * head_dim, k_cache, v_cache);
  CUDA_CHECK_LAUNCH();
}

}  // namespace tpserve::cuda
