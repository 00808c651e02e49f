#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstddef>

#include "common/check.h"
#include "common/dtype.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/ops.h"

namespace tpserve::cuda {
namespace {

// One 32-value Q8_0 block as common/quantize_row.cc makes it: d = amax / 127 rounded to f16, q = lround(x / d)
// computed as x * (1 / d) (IEEE operations, no contraction), so the bytes are the CPU's.
__device__ void QuantizeQ8_0Block(const float* x, uint8_t* block) {
  float amax = 0.0f;
  for (int j = 0; j < kQuantBlock; ++j) amax = fmaxf(amax, fabsf(x[j]));
  const float d = __fdiv_rn(amax, 127.0f);
  const float id = d != 0.0f ? __fdiv_rn(1.0f, d) : 0.0f;
  *reinterpret_cast<__half*>(block + offsetof(BlockQ8_0, d)) = __float2half_rn(d);
  for (int j = 0; j < kQuantBlock; ++j) {
    block[offsetof(BlockQ8_0, qs) + j] = static_cast<uint8_t>(static_cast<int8_t>(lroundf(__fmul_rn(x[j], id))));
  }
}

// One block per token; threads over its row of Hkv * D values (over its 32-value blocks for Q8_0).
__global__ void WriteKvCacheKernel(const float* k, const float* v, const int32_t* slot_mapping, int64_t row,
                                   int64_t row_bytes, DType type, uint8_t* k_cache, uint8_t* v_cache) {
  const int64_t t = blockIdx.x;
  const int64_t slot = slot_mapping[t];
  if (slot < 0) return;
  for (int which = 0; which < 2; ++which) {
    const float* src = (which == 0 ? k : v) + t * row;
    uint8_t* dst = (which == 0 ? k_cache : v_cache) + slot * row_bytes;
    if (type == DType::kQ8_0) {
      for (int64_t b = threadIdx.x; b < row / kQuantBlock; b += blockDim.x) {
        QuantizeQ8_0Block(src + b * kQuantBlock, dst + b * sizeof(BlockQ8_0));
      }
      continue;
    }
    for (int64_t i = threadIdx.x; i < row; i += blockDim.x) {
      if (type == DType::kF16) {
        reinterpret_cast<__half*>(dst)[i] = __float2half_rn(src[i]);
      } else if (type == DType::kBF16) {
        reinterpret_cast<__nv_bfloat16*>(dst)[i] = __float2bfloat16_rn(src[i]);
      } else {
        reinterpret_cast<float*>(dst)[i] = src[i];
      }
    }
  }
}

}  // namespace

void WriteKvCache(const float* k, const float* v, const int32_t* slot_mapping, int64_t num_tokens,
                  int64_t num_kv_heads, int64_t head_dim, void* k_cache, void* v_cache, DType kv_dtype,
                  cudaStream_t stream) {
  CHECK(kv_dtype == DType::kF32 || kv_dtype == DType::kF16 || kv_dtype == DType::kBF16 || kv_dtype == DType::kQ8_0)
      << DTypeName(kv_dtype) << " is not a KV cache type";
  CHECK_EQ(head_dim % DTypeBlockElems(kv_dtype), 0);
  if (num_tokens == 0) return;
  const int64_t row = num_kv_heads * head_dim;
  WriteKvCacheKernel<<<static_cast<unsigned>(num_tokens), 256, 0, stream>>>(
      k, v, slot_mapping, row, DTypeRowBytes(kv_dtype, row), kv_dtype, static_cast<uint8_t*>(k_cache),
      static_cast<uint8_t*>(v_cache));
  CUDA_CHECK_LAUNCH();
}

}  // namespace tpserve::cuda
