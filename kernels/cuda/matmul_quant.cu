// Quantised weights (every quantised type, K-quants in their 32-value groups) times Q8-quantised
// activations. One warp per (row, group of up to kTokensPerWarp tokens): lane l takes blocks l, l + 32,
// ... of the row, unpacks each weight block into 32 int8 once (DecodeBlock), and takes its exact integer
// dot product (dp4a) with every token's activation block, per half of 16 values scaled by the half's
// integer scale (Q2_K, Q3_K, Q6_K); each token accumulates d_w·d_a·Σ (− dmin·d_a·Σ min·a, Q2_K) in f32 in
// block order, the offset types m·Σa beside it, then the warp sums the lanes in a fixed shuffle tree.
// The work of a (row, token) never depends on T or its group.
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

// Weight block b of a row as 8 words of 4 int8 in element order (words 0..3: the first half), with
// its scales.
template <DType kType>
__device__ __forceinline__ void LoadWeightBlock(const uint8_t* row, int64_t b, int (&q)[8], DeviceQuantBlock* blk) {
  DecodeBlock<kType>(row, b, blk);
#pragma unroll
  for (int i = 0; i < 8; ++i) q[i] = Pack4(blk->q[4 * i], blk->q[4 * i + 1], blk->q[4 * i + 2], blk->q[4 * i + 3]);
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
  constexpr MinKind kMin = MinKindOf(kType);
  for (int64_t b = lane; b < num_blocks; b += 32) {
    int q[8];
    DeviceQuantBlock blk;
    LoadWeightBlock<kType>(row, b, q, &blk);
#pragma unroll
    for (int t = 0; t < kTokensPerWarp; ++t) {
      if (t >= nt) break;
      const BlockQ8Act& a = x[(t0 + t) * num_blocks + b];
      const int2* aq = reinterpret_cast<const int2*>(a.qs);  // 8-byte aligned: qs sits at offset 8 of 40
      int half_sum[2] = {0, 0}, half_act[2] = {0, 0};
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int2 v = aq[i];
        half_sum[i / 2] = __dp4a(q[2 * i], v.x, half_sum[i / 2]);
        half_sum[i / 2] = __dp4a(q[2 * i + 1], v.y, half_sum[i / 2]);
        if constexpr (kMin == MinKind::kHalves) {
          half_act[i / 2] = __dp4a(0x01010101, v.x, half_act[i / 2]);
          half_act[i / 2] = __dp4a(0x01010101, v.y, half_act[i / 2]);
        }
      }
      const int sum = half_sum[0] * blk.scale[0] + half_sum[1] * blk.scale[1];
      acc[t] = __fadd_rn(acc[t], __fmul_rn(static_cast<float>(sum), __fmul_rn(blk.d, a.d)));
      if constexpr (kMin == MinKind::kHalves) {
        const int min_sum = half_act[0] * blk.min[0] + half_act[1] * blk.min[1];
        acc[t] = __fsub_rn(acc[t], __fmul_rn(static_cast<float>(min_sum), __fmul_rn(blk.dmin, a.d)));
      }
      if constexpr (kMin == MinKind::kOffset) acc_min[t] = __fadd_rn(acc_min[t], __fmul_rn(blk.m, a.sum));
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
  auto launch = [&](auto kernel) {
    kernel<<<grid, threads, 0, stream>>>(data, w.rows, w.cols, row_bytes, act, num_tokens, y);
  };
  switch (w.type) {
    case DType::kQ8_0: launch(QuantGemmKernel<DType::kQ8_0>); break;
    case DType::kQ4_0: launch(QuantGemmKernel<DType::kQ4_0>); break;
    case DType::kQ4_1: launch(QuantGemmKernel<DType::kQ4_1>); break;
    case DType::kQ5_0: launch(QuantGemmKernel<DType::kQ5_0>); break;
    case DType::kQ5_1: launch(QuantGemmKernel<DType::kQ5_1>); break;
    case DType::kQ2_K: launch(QuantGemmKernel<DType::kQ2_K>); break;
    case DType::kQ3_K: launch(QuantGemmKernel<DType::kQ3_K>); break;
    case DType::kQ4_K: launch(QuantGemmKernel<DType::kQ4_K>); break;
    case DType::kQ5_K: launch(QuantGemmKernel<DType::kQ5_K>); break;
    case DType::kQ6_K: launch(QuantGemmKernel<DType::kQ6_K>); break;
    default:
      CHECK(false) << "QuantMatMul of non-quantised " << DTypeName(w.type);
  }
  CUDA_CHECK_LAUNCH();
  CUDA_CHECK(cudaFreeAsync(scratch, stream));
}

}  // namespace tpserve::cuda
