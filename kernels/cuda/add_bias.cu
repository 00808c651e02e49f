#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/ops.h"

namespace tpserve::cuda {
namespace {

__global__ void AddBiasKernel(float* x, const float* bias, int64_t total, int64_t n) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < total) x[i] += bias[i % n];
}

}  // namespace

void AddBias(float* x, const float* bias, int64_t num_rows, int64_t n, cudaStream_t stream) {
  if (num_rows == 0 || n == 0) return;
  AddBiasKernel<<<GridFor(num_rows * n, 256), 256, 0, stream>>>(x, bias, num_rows * n, n);
  CUDA_CHECK_LAUNCH();
}

}  // namespace tpserve::cuda
