#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/ops.h"

namespace tpserve::cuda {
namespace {

__global__ void ScaleKernel(float* x, int64_t n, float s) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) x[i] *= s;
}

}  // namespace

void Scale(float* x, int64_t n, float s, cudaStream_t stream) {
  if (n == 0) return;
  ScaleKernel<<<GridFor(n, 256), 256, 0, stream>>>(x, n, s);
  CUDA_CHECK_LAUNCH();
}

}  // namespace tpserve::cuda
