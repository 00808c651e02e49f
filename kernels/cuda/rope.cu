#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/ops.h"

namespace tpserve::cuda {
namespace {

// One thread per (token, head, pair).
__global__ void RopeKernel(float* x, const int32_t* positions, int64_t num_tokens, int64_t num_heads,
                           int64_t head_dim, const float* inv_freq, bool interleaved) {
  const int64_t half = head_dim / 2;
  const int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (idx >= num_tokens * num_heads * half) return;
  const int64_t i = idx % half;
  const int64_t th = idx / half;  // token * num_heads + head
  const int64_t t = th / num_heads;
  // The angle in f64 as on the CPU: large positions lose radians in f32.
  const double angle = static_cast<double>(positions[t]) * static_cast<double>(inv_freq[i]);
  const float c = static_cast<float>(cos(angle)), s = static_cast<float>(sin(angle));
  float* v = x + th * head_dim;
  const int64_t a = interleaved ? 2 * i : i;
  const int64_t b = interleaved ? 2 * i + 1 : i + half;
  const float x0 = v[a], x1 = v[b];
  v[a] = x0 * c - x1 * s;
  v[b] = x0 * s + x1 * c;
}

}  // namespace

void ApplyRope(float* x, const int32_t* positions, int64_t num_tokens, int64_t num_heads, int64_t head_dim,
               const float* inv_freq, RopeLayout layout, cudaStream_t stream) {
  const int64_t n = num_tokens * num_heads * (head_dim / 2);
  if (n == 0) return;
  RopeKernel<<<GridFor(n, 256), 256, 0, stream>>>(x, positions, num_tokens, num_heads, head_dim, inv_freq,
                                                  layout == RopeLayout::kInterleaved);
  CUDA_CHECK_LAUNCH();
}

}  // namespace tpserve::cuda
