#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/ops.h"

namespace tpserve::cuda {
namespace {

__global__ void SiluMulKernel(const float* gate, const float* up, int64_t n, float* out) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const float g = gate[i];
  out[i] = g / (1.0f + expf(-g)) * up[i];
}

}  // namespace

void SiluMul(const float* gate, const float* up, int64_t n, float* out, cudaStream_t stream) {
  if (n == 0) return;
  SiluMulKernel<<<GridFor(n, 256), 256, 0, stream>>>(gate, up, n, out);
  CUDA_CHECK_LAUNCH();
}

}  // namespace tpserve::cuda
