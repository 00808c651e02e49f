// MatMul on the GPU: cuBLAS for float weights, the dequantising kernel for quantised ones.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "common/check.h"
#include "common/dtype.h"
#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/ops.h"

namespace tpserve::cuda {
namespace {

__global__ void ToHalfKernel(const float* x, int64_t n, __half* out) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) out[i] = __float2half_rn(x[i]);
}

__global__ void ToBf16Kernel(const float* x, int64_t n, __nv_bfloat16* out) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) out[i] = __float2bfloat16_rn(x[i]);
}

}  // namespace

void MatMul(cublasHandle_t cublas, const WeightMatrix& w, const float* x, int64_t num_tokens, float* y,
            cudaStream_t stream) {
  if (num_tokens == 0 || w.rows == 0) return;
  if (IsQuantized(w.type)) {
    QuantMatMul(w, x, num_tokens, y, stream);
    return;
  }
  // Row-major y[T, rows] = x[T, cols] · Wᵀ is column-major Y[rows, T] = Wᵀ[rows, cols] · X[cols, T],
  // with W row-major [rows, cols] read as column-major [cols, rows] (lda = cols).
  const float alpha = 1.0f, beta = 0.0f;
  const int m = static_cast<int>(w.rows), n = static_cast<int>(num_tokens), k = static_cast<int>(w.cols);
  const void* b = x;
  cudaDataType_t ab_type = CUDA_R_32F;
  void* converted = nullptr;
  if (w.type != DType::kF32) {
    // cuBLAS wants both inputs in one type: round the activations to the weight's half type.
    const int64_t count = num_tokens * w.cols;
    CUDA_CHECK(cudaMallocAsync(&converted, count * 2, stream));
    if (w.type == DType::kF16) {
      ToHalfKernel<<<GridFor(count, 256), 256, 0, stream>>>(x, count, static_cast<__half*>(converted));
      ab_type = CUDA_R_16F;
    } else {
      CHECK(w.type == DType::kBF16);
      ToBf16Kernel<<<GridFor(count, 256), 256, 0, stream>>>(x, count, static_cast<__nv_bfloat16*>(converted));
      ab_type = CUDA_R_16BF;
    }
    CUDA_CHECK_LAUNCH();
    b = converted;
  }
  CUBLAS_CHECK(cublasGemmEx(cublas, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &alpha, w.data, ab_type, k, b, ab_type, k,
                            &beta, y, CUDA_R_32F, m, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  if (converted != nullptr) CUDA_CHECK(cudaFreeAsync(converted, stream));
}

}  // namespace tpserve::cuda
