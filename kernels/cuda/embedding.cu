#include "common/dtype.h"
#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/dequantize.cuh"
#include "kernels/cuda/ops.h"

namespace tpserve::cuda {
namespace {

// One block per token; each thread dequantises elements of the row on its own.
__global__ void EmbeddingKernel(DType type, const uint8_t* table, int64_t rows, int64_t cols, int64_t row_bytes,
                                int64_t vocab_begin, const int32_t* ids, float* out) {
  const int64_t t = blockIdx.x;
  float* ot = out + t * cols;
  const int64_t local = static_cast<int64_t>(ids[t]) - vocab_begin;
  const bool inside = local >= 0 && local < rows;
  const uint8_t* row = table + (inside ? local : 0) * row_bytes;
  for (int64_t i = threadIdx.x; i < cols; i += blockDim.x) ot[i] = inside ? DequantizeElement(type, row, i) : 0.0f;
}

}  // namespace

void EmbeddingLookup(const WeightMatrix& table, int64_t vocab_begin, const int32_t* ids, int64_t num_tokens,
                     float* out, cudaStream_t stream) {
  if (num_tokens == 0) return;
  EmbeddingKernel<<<static_cast<unsigned>(num_tokens), 256, 0, stream>>>(
      table.type, static_cast<const uint8_t*>(table.data), table.rows, table.cols,
      DTypeRowBytes(table.type, table.cols), vocab_begin, ids, out);
  CUDA_CHECK_LAUNCH();
}

}  // namespace tpserve::cuda
