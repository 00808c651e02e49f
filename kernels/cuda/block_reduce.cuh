// Deterministic block-wide reductions: a fixed shuffle tree inside each warp, then warp 0 over the
// per-warp partials in warp order. REQUIRES: blockDim.x a multiple of 32, at most 1024.
#pragma once

#include <cuda_runtime.h>

namespace tpserve::cuda {

__device__ __forceinline__ float WarpSum(float v) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

__device__ __forceinline__ float WarpMax(float v) {
  for (int offset = 16; offset > 0; offset >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

// `scratch` holds 32 floats of shared memory; every thread gets the result.
template <bool kMax>
__device__ __forceinline__ float BlockReduce(float v, float* scratch) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, num_warps = blockDim.x / 32;
  v = kMax ? WarpMax(v) : WarpSum(v);
  __syncthreads();  // scratch may still be read by a previous reduction
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  if (warp == 0) {
    float w = lane < num_warps ? scratch[lane] : (kMax ? -INFINITY : 0.0f);
    w = kMax ? WarpMax(w) : WarpSum(w);
    if (lane == 0) scratch[0] = w;
  }
  __syncthreads();
  return scratch[0];
}

__device__ __forceinline__ float BlockSum(float v, float* scratch) { return BlockReduce<false>(v, scratch); }
__device__ __forceinline__ float BlockMax(float v, float* scratch) { return BlockReduce<true>(v, scratch); }

inline unsigned GridFor(int64_t n, int threads) { return static_cast<unsigned>((n + threads - 1) / threads); }

}  // namespace tpserve::cuda
