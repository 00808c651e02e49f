// Quantised weights (Q8_0 / Q4_0 / Q4_1) times Q8-quantised activations. One warp per (row, group
// of up to kTokensPerWarp tokens): lane l takes blocks l, l + 32, ... of the row, unpacks each weight
// block into 32 int8 once, and takes its exact integer dot product (dp4a) with every token's
// activation block; each token accumulates d_w·d_a·Σ in f32 in block order, then the warp sums the
// lanes in a fixed shuffle tree. The work of a (row, token) never depends on T or its group.
#include "common/check.h"
#include "common/dtype.h"
#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/dequantize.cuh"
#include "kernels/cuda/ops.h"

namespace tpserve::cuda {
namespace {

constexpr int kWarpsPerBlock = 4;
constexpr int kTokensPerWarp = 8;

__device__ __forceinline__ int Pack4(int a, int b, int c, int d) {
  return (a & 0xff) | ((b & 0xff) << 8) | ((c & 0xff) << 16) | ((d & 0xff) << 24);
}

// Weight block b of a row as 8 words of 4 int8 in element order; d (and m for Q4_1) its scales.
template <DType kType>
__device__ __forceinline__ void LoadWeightBlock(const uint8_t* row, int64_t b, int (&q)[8], float* d, float* m) {
  auto u16 = [](const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); };
  if constexpr (kType == DType::kQ8_0) {
    const uint8_t* blk = row + b * sizeof(BlockQ8_0);
    *d = HalfBitsToFloat(u16(blk));
    const int8_t* qs = reinterpret_cast<const int8_t*>(blk + 2);
#pragma unroll
    for (int i = 0; i < 8; ++i) q[i] = Pack4(qs[4 * i], qs[4 * i + 1], qs[4 * i + 2], qs[4 * i + 3]);
  } else {
    const uint8_t* qs;
    int offset = 0;
    if constexpr (kType == DType::kQ4_0) {
      const uint8_t* blk = row + b * sizeof(BlockQ4_0);
      *d = HalfBitsToFloat(u16(blk));
      qs = blk + 2;
      offset = 8;
    } else {
      const uint8_t* blk = row + b * sizeof(BlockQ4_1);
      *d = HalfBitsToFloat(u16(blk));
      *m = HalfBitsToFloat(u16(blk + 2));
      qs = blk + 4;
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) {  // elements 0..15: low nibbles; 16..31: high nibbles
      q[i] = Pack4((qs[4 * i] & 0xf) - offset, (qs[4 * i + 1] & 0xf) - offset, (qs[4 * i + 2] & 0xf) - offset,
                   (qs[4 * i + 3] & 0xf) - offset);
      q[i + 4] = Pack4((qs[4 * i] >> 4) - offset, (qs[4 * i + 1] >> 4) - offset, (qs[4 * i + 2] >> 4) - offset,
                       (qs[4 * i + 3] >> 4) - offset);
    }
  }
}

template <DType kType>
__global__ void QuantGemmKernel(const uint8_t* w, int64_t rows, int64_t cols, int64_t row_bytes,
                                const BlockQ8Act* x, int64_t num_tokens, float* y) {
  const int lane = threadIdx.x % 32;
  const int64_t r = blockIdx.x * static_cast<int64_t>(kWarpsPerBlock) + threadIdx.x / 32;
  const int64_t t0 = blockIdx.y * static_cast<int64_t>(kTokensPerWarp);
  if (r >= rows) return;  // whole warps exit together
  const int nt = static_cast<int>(num_tokens - t0 < kTokensPerWarp ? num_tokens - t0 : kTokensPerWarp);
  const int64_t num_blocks = cols / kQuantBlock;
  const uint8_t* row = w + r * row_bytes;
  float acc[kTokensPerWarp], acc_min[kTokensPerWarp];
#pragma unroll
  for (int t = 0; t < kTokensPerWarp; ++t) acc[t] = acc_min[t] = 0.0f;
  for (int64_t b = lane; b < num_blocks; b += 32) {
    int q[8];
    float d = 0.0f, m = 0.0f;
    LoadWeightBlock<kType>(row, b, q, &d, &m);
#pragma unroll
    for (int t = 0; t < kTokensPerWarp; ++t) {
      if (t >= nt) break;
      const BlockQ8Act& a = x[(t0 + t) * num_blocks + b];
      const int2* aq = reinterpret_cast<const int2*>(a.qs);  // 8-byte aligned: qs sits at offset 8 of 40
      int sum = 0;
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int2 v = aq[i];
        sum = __dp4a(q[2 * i], v.x, sum);
        sum = __dp4a(q[2 * i + 1], v.y, sum);
      }
      acc[t] = __fadd_rn(acc[t], __fmul_rn(static_cast<float>(sum), __fmul_rn(d, a.d)));
      if constexpr (kType == DType::kQ4_1) acc_min[t] = __fadd_rn(acc_min[t], __fmul_rn(m, a.sum));
    }
  }
#pragma unroll
  for (int t = 0; t < kTokensPerWarp; ++t) {
    if (t >= nt) break;
    const float total = WarpSum(acc[t]) + WarpSum(acc_min[t]);
    if (lane == 0) y[(t0 + t) * rows + r] = total;
  }
}

}  // namespace

void QuantMatMul(const WeightMatrix& w, const float* x, int64_t num_tokens, float* y, cudaStream_t stream) {
  if (num_tokens == 0 || w.rows == 0) return;
  CHECK_EQ(w.cols % kQuantBlock, 0);
  const int64_t token_groups = (num_tokens + kTokensPerWarp - 1) / kTokensPerWarp;
  CHECK(token_groups <= 65535) << "token count exceeds the grid's y dimension";
  void* scratch = nullptr;
  const int64_t act_bytes = num_tokens * (w.cols / kQuantBlock) * static_cast<int64_t>(sizeof(BlockQ8Act));
  CUDA_CHECK(cudaMallocAsync(&scratch, act_bytes, stream));
  auto* act = static_cast<BlockQ8Act*>(scratch);
  QuantizeActivations(x, num_tokens, w.cols, act, stream);
  const dim3 grid(GridFor(w.rows, kWarpsPerBlock), static_cast<unsigned>(token_groups));
  const auto* data = static_cast<const uint8_t*>(w.data);
  const int64_t row_bytes = DTypeRowBytes(w.type, w.cols);
  const int threads = 32 * kWarpsPerBlock;
  switch (w.type) {
    case DType::kQ8_0:
      QuantGemmKernel<DType::kQ8_0><<<grid, threads, 0, stream>>>(data, w.rows, w.cols, row_bytes, act, num_tokens, y);
      break;
    case DType::kQ4_0:
      QuantGemmKernel<DType::kQ4_0><<<grid, threads, 0, stream>>>(data, w.rows, w.cols, row_bytes, act, num_tokens, y);
      break;
    case DType::kQ4_1:
      QuantGemmKernel<DType::kQ4_1><<<grid, threads, 0, stream>>>(data, w.rows, w.cols, row_bytes, act, num_tokens, y);
      break;
    default:
      CHECK(false) << "QuantMatMul of non-quantised " << DTypeName(w.type);
  }
  CUDA_CHECK_LAUNCH();
  CUDA_CHECK(cudaFreeAsync(scratch, stream));
}

}  // namespace tpserve::cuda
