#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/ops.h"

namespace tpserve::cuda {
namespace {

// One block per token.
__global__ void RmsNormKernel(const float* x, const float* weight, int64_t dim, float eps, float* out) {
  __shared__ float scratch[32];
  const float* xt = x + blockIdx.x * dim;
  float* ot = out + blockIdx.x * dim;
  float sum_sq = 0.0f;
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) sum_sq += xt[i] * xt[i];
  sum_sq = BlockSum(sum_sq, scratch);
  const float inv_rms = rsqrtf(sum_sq / static_cast<float>(dim) + eps);
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) ot[i] = xt[i] * inv_rms * weight[i];
}

}  // namespace

void RmsNorm(const float* x, const float* weight, int64_t num_tokens, int64_t dim, float eps, float* out,
             cudaStream_t stream) {
  if (num_tokens == 0) return;
  RmsNormKernel<<<static_cast<unsigned>(num_tokens), 256, 0, stream>>>(x, weight, dim, eps, out);
  CUDA_CHECK_LAUNCH();
}

}  // namespace tpserve::cuda
