// The GPU twin of QuantizeActivationRow (kernels/cpu/quantize_activations.cc): the same blocks, the
// same scale and the same rounding (half away from zero, no fused multiply-add), so quantised
// matmuls see the same integer activations on both backends.
#include "common/check.h"
#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/ops.h"

namespace tpserve::cuda {
namespace {

constexpr int kBlocksPerCta = 8;  // one warp per 32-activation block

__global__ void QuantizeActivationsKernel(const float* x, int64_t num_blocks, BlockQ8Act* out) {
  const int lane = threadIdx.x % 32;
  const int64_t b = blockIdx.x * static_cast<int64_t>(kBlocksPerCta) + threadIdx.x / 32;
  if (b >= num_blocks) return;  // whole warps exit together
  const float v = x[b * kQuantBlock + lane];
  const float amax = WarpMax(fabsf(v));
  const float d = __fdiv_rn(amax, 127.0f);
  const float id = amax != 0.0f ? __fdiv_rn(127.0f, amax) : 0.0f;
  const float scaled = __fmul_rn(v, id);
  const int q = static_cast<int>(scaled < 0.0f ? __fsub_rn(scaled, 0.5f) : __fadd_rn(scaled, 0.5f));
  int isum = q;
  for (int offset = 16; offset > 0; offset >>= 1) isum += __shfl_xor_sync(0xffffffffu, isum, offset);
  BlockQ8Act& dst = out[b];
  dst.qs[lane] = static_cast<int8_t>(q);
  if (lane == 0) {
    dst.d = d;
    dst.sum = __fmul_rn(d, static_cast<float>(isum));
  }
}

}  // namespace

void QuantizeActivations(const float* x, int64_t num_tokens, int64_t cols, BlockQ8Act* out, cudaStream_t stream) {
  CHECK_EQ(cols % kQuantBlock, 0);
  const int64_t num_blocks = num_tokens * (cols / kQuantBlock);
  if (num_blocks == 0) return;
  QuantizeActivationsKernel<<<GridFor(num_blocks, kBlocksPerCta), 32 * kBlocksPerCta, 0, stream>>>(x, num_blocks, out);
  CUDA_CHECK_LAUNCH();
}

}  // namespace tpserve::cuda
