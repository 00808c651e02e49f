#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/ops.h"

namespace tpserve::cuda {
namespace {

__global__ void ResidualAddKernel(float* x, const float* y, int64_t n) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) x[i] += y[i];
}

}  // namespace

void ResidualAdd(float* x, const float* y, int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  ResidualAddKernel<<<GridFor(n, 256), 256, 0, stream>>>(x, y, n);
  CUDA_CHECK_LAUNCH();
}

}  // namespace tpserve::cuda
