// Device-side decoding of the stored weight types (layouts in common/dtype.h).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "common/dtype.h"

namespace tpserve::cuda {

__device__ __forceinline__ float HalfBitsToFloat(uint16_t h) { return __half2float(__ushort_as_half(h)); }
__device__ __forceinline__ float Bf16BitsToFloat(uint16_t h) { return __uint_as_float(static_cast<uint32_t>(h) << 16); }

// Element i of a row stored as `type` (blocks read with byte loads: they are not aligned).
__device__ __forceinline__ float DequantizeElement(DType type, const uint8_t* row, int64_t i) {
  auto u16 = [](const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); };
  switch (type) {
    case DType::kF32: return reinterpret_cast<const float*>(row)[i];
    case DType::kF16: return HalfBitsToFloat(reinterpret_cast<const uint16_t*>(row)[i]);
    case DType::kBF16: return Bf16BitsToFloat(reinterpret_cast<const uint16_t*>(row)[i]);
    case DType::kQ8_0: {
      const uint8_t* b = row + (i / 32) * sizeof(BlockQ8_0);
      return HalfBitsToFloat(u16(b)) * static_cast<float>(static_cast<int8_t>(b[2 + i % 32]));
    }
    case DType::kQ4_0: {
      const uint8_t* b = row + (i / 32) * sizeof(BlockQ4_0);
      const int j = static_cast<int>(i % 32);
      const int q = j < 16 ? (b[2 + j] & 0xf) : (b[2 + j - 16] >> 4);
      return HalfBitsToFloat(u16(b)) * static_cast<float>(q - 8);
    }
    case DType::kQ4_1: {
      const uint8_t* b = row + (i / 32) * sizeof(BlockQ4_1);
      const int j = static_cast<int>(i % 32);
      const int q = j < 16 ? (b[4 + j] & 0xf) : (b[4 + j - 16] >> 4);
      return HalfBitsToFloat(u16(b)) * static_cast<float>(q) + HalfBitsToFloat(u16(b + 2));
    }
  }
  return 0.0f;
}

}  // namespace tpserve::cuda
