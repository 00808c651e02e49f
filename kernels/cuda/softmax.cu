#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/ops.h"

namespace tpserve::cuda {
namespace {

// One block per row: max, exp and sum, scale.
__global__ void SoftmaxKernel(float* x, int64_t n) {
  __shared__ float scratch[32];
  float* row = x + blockIdx.x * n;
  float max = -INFINITY;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) max = fmaxf(max, row[i]);
  max = BlockMax(max, scratch);
  float sum = 0.0f;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const float e = expf(row[i] - max);
    row[i] = e;
    sum += e;
  }
  sum = BlockSum(sum, scratch);
  const float inv = 1.0f / sum;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) row[i] *= inv;
}

}  // namespace

void Softmax(float* x, int64_t num_rows, int64_t n, cudaStream_t stream) {
  if (num_rows == 0 || n == 0) return;
  SoftmaxKernel<<<static_cast<unsigned>(num_rows), 512, 0, stream>>>(x, n);
  CUDA_CHECK_LAUNCH();
}

}  // namespace tpserve::cuda
