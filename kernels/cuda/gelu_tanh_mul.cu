#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/ops.h"

namespace tpserve::cuda {
namespace {

__global__ void GeluTanhMulKernel(const float* gate, const float* up, int64_t n, float* out) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const float g = gate[i];
  const float u = 0.7978845608028654f * (g + 0.044715f * g * g * g);  // sqrt(2/pi) (g + 0.044715 g^3)
  out[i] = g / (1.0f + expf(-2.0f * u)) * up[i];                      // g (1 + tanh u) / 2
}

}  // namespace

void GeluTanhMul(const float* gate, const float* up, int64_t n, float* out, cudaStream_t stream) {
  if (n == 0) return;
  GeluTanhMulKernel<<<GridFor(n, 256), 256, 0, stream>>>(gate, up, n, out);
  CUDA_CHECK_LAUNCH();
}

}  // namespace tpserve::cuda
