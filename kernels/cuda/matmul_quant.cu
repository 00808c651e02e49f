// Dequantising matrix-vector kernel for Q8_0 / Q4_0 / Q4_1 weights: one warp per (row, token).
// Lane l takes blocks l, l + 32, ... of the row, dequantises in registers and accumulates in f32;
// the warp then sums lanes in a fixed shuffle tree. The work of a (row, token) never depends on T.
#include "common/check.h"
#include "common/dtype.h"
#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/dequantize.cuh"
#include "kernels/cuda/ops.h"

namespace tpserve::cuda {
namespace {

constexpr int kWarpsPerBlock = 4;

template <DType kType>
__global__ void QuantGemvKernel(const uint8_t* w, int64_t rows, int64_t cols, int64_t row_bytes, const float* x,
                                float* y) {
  const int lane = threadIdx.x % 32;
  const int64_t r = blockIdx.x * static_cast<int64_t>(kWarpsPerBlock) + threadIdx.x / 32;
  const int64_t t = blockIdx.y;
  if (r >= rows) return;  // whole warps exit together
  const uint8_t* row = w + r * row_bytes;
  const float* xt = x + t * cols;
  float acc = 0.0f;
  for (int64_t b = lane; b < cols / 32; b += 32) {
    const float* xb = xt + b * 32;
    float block_sum = 0.0f;
    if constexpr (kType == DType::kQ8_0) {
      const uint8_t* blk = row + b * sizeof(BlockQ8_0);
      const float d = HalfBitsToFloat(static_cast<uint16_t>(blk[0] | (blk[1] << 8)));
      for (int j = 0; j < 32; ++j) block_sum += static_cast<float>(static_cast<int8_t>(blk[2 + j])) * xb[j];
      acc += d * block_sum;
    } else if constexpr (kType == DType::kQ4_0) {
      const uint8_t* blk = row + b * sizeof(BlockQ4_0);
      const float d = HalfBitsToFloat(static_cast<uint16_t>(blk[0] | (blk[1] << 8)));
      for (int j = 0; j < 16; ++j) {
        block_sum += static_cast<float>((blk[2 + j] & 0xf) - 8) * xb[j];
        block_sum += static_cast<float>((blk[2 + j] >> 4) - 8) * xb[j + 16];
      }
      acc += d * block_sum;
    } else {
      const uint8_t* blk = row + b * sizeof(BlockQ4_1);
      const float d = HalfBitsToFloat(static_cast<uint16_t>(blk[0] | (blk[1] << 8)));
      const float m = HalfBitsToFloat(static_cast<uint16_t>(blk[2] | (blk[3] << 8)));
      float x_sum = 0.0f;
      for (int j = 0; j < 16; ++j) {
        block_sum += static_cast<float>(blk[4 + j] & 0xf) * xb[j];
        block_sum += static_cast<float>(blk[4 + j] >> 4) * xb[j + 16];
        x_sum += xb[j] + xb[j + 16];
      }
      acc += d * block_sum + m * x_sum;
    }
  }
  acc = WarpSum(acc);
  if (lane == 0) y[t * rows + r] = acc;
}

}  // namespace

void QuantMatMul(const WeightMatrix& w, const float* x, int64_t num_tokens, float* y, cudaStream_t stream) {
  if (num_tokens == 0 || w.rows == 0) return;
  CHECK(num_tokens <= 65535) << "token count exceeds the grid's y dimension";
  const dim3 grid(GridFor(w.rows, kWarpsPerBlock), static_cast<unsigned>(num_tokens));
  const auto* data = static_cast<const uint8_t*>(w.data);
  const int64_t row_bytes = DTypeRowBytes(w.type, w.cols);
  switch (w.type) {
    case DType::kQ8_0:
      QuantGemvKernel<DType::kQ8_0><<<grid, 32 * kWarpsPerBlock, 0, stream>>>(data, w.rows, w.cols, row_bytes, x, y);
      break;
    case DType::kQ4_0:
      QuantGemvKernel<DType::kQ4_0><<<grid, 32 * kWarpsPerBlock, 0, stream>>>(data, w.rows, w.cols, row_bytes, x, y);
      break;
    case DType::kQ4_1:
      QuantGemvKernel<DType::kQ4_1><<<grid, 32 * kWarpsPerBlock, 0, stream>>>(data, w.rows, w.cols, row_bytes, x, y);
      break;
    default:
      CHECK(false) << "QuantMatMul of non-quantised " << DTypeName(w.type);
  }
  CUDA_CHECK_LAUNCH();
}

}  // namespace tpserve::cuda
