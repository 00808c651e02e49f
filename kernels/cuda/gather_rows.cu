#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/ops.h"

namespace tpserve::cuda {
namespace {

// One block per output row.
__global__ void GatherRowsKernel(const float* x, const int32_t* rows, int64_t dim, float* out) {
  const float* src = x + static_cast<int64_t>(rows[blockIdx.x]) * dim;
  float* dst = out + blockIdx.x * dim;
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) dst[i] = src[i];
}

}  // namespace

void GatherRows(const float* x, const int32_t* rows, int64_t num_rows, int64_t dim, float* out, cudaStream_t stream) {
  if (num_rows == 0) return;
  GatherRowsKernel<<<static_cast<unsigned>(num_rows), 256, 0, stream>>>(x, rows, dim, out);
  CUDA_CHECK_LAUNCH();
}

}  // namespace tpserve::cuda
