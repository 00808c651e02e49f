// Device-side decoding of the stored weight types (layouts in common/dtype.h): the CUDA twin of
// common/quant_block.h's DecodeQuantBlock (same values and scales; tests/gpu compares them).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "common/dtype.h"
#include "common/quant_block.h"

namespace tpserve::cuda {

__device__ __forceinline__ float HalfBitsToFloat(uint16_t h) { return __half2float(__ushort_as_half(h)); }
__device__ __forceinline__ float Bf16BitsToFloat(uint16_t h) { return __uint_as_float(static_cast<uint32_t>(h) << 16); }
// Blocks are read with byte loads: they are not aligned.
__device__ __forceinline__ uint16_t LoadU16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }
__device__ __forceinline__ float LoadHalf(const uint8_t* p) { return HalfBitsToFloat(LoadU16(p)); }

// One 32-value block: x[j] = (d · scale[j / 16]) · q[j] (+ m) (− dmin · min[j / 16]), as QuantBlock.
struct DeviceQuantBlock {
  int8_t q[kQuantBlock];
  int scale[2];
  int min[2];
  float d;
  float m;
  float dmin;
};

// Nibble j < 16 of 16 packed bytes is byte j's low nibble, j + 16 its high one.
__device__ __forceinline__ int Nibble(const uint8_t* qs, int j) { return j < 16 ? qs[j] & 0xf : qs[j - 16] >> 4; }

// Block b (values [32·b, 32·b + 32)) of a row of kType starting at `row`.
template <DType kType>
__device__ __forceinline__ void DecodeBlock(const uint8_t* row, int64_t b, DeviceQuantBlock* out) {
  out->scale[0] = out->scale[1] = 1;
  out->min[0] = out->min[1] = 0;
  out->m = out->dmin = 0.0f;
  // K-quants: group s of super-block b / 8; half h (128 values) and quarter k of it (s = 4h + k).
  const int s = static_cast<int>(b % 8), h = s / 4, k = s % 4;
  if constexpr (kType == DType::kQ8_0) {
    const uint8_t* blk = row + b * sizeof(BlockQ8_0);
    out->d = LoadHalf(blk);
    for (int j = 0; j < kQuantBlock; ++j) out->q[j] = static_cast<int8_t>(blk[offsetof(BlockQ8_0, qs) + j]);
  } else if constexpr (kType == DType::kQ4_0 || kType == DType::kQ4_1) {
    using Block = std::conditional_t<kType == DType::kQ4_0, BlockQ4_0, BlockQ4_1>;
    const uint8_t* blk = row + b * sizeof(Block);
    out->d = LoadHalf(blk);
    if constexpr (kType == DType::kQ4_1) out->m = LoadHalf(blk + offsetof(BlockQ4_1, m));
    const int offset = kType == DType::kQ4_0 ? 8 : 0;
    for (int j = 0; j < kQuantBlock; ++j) out->q[j] = static_cast<int8_t>(Nibble(blk + offsetof(Block, qs), j) - offset);
  } else if constexpr (kType == DType::kQ5_0 || kType == DType::kQ5_1) {
    using Block = std::conditional_t<kType == DType::kQ5_0, BlockQ5_0, BlockQ5_1>;
    const uint8_t* blk = row + b * sizeof(Block);
    out->d = LoadHalf(blk);
    if constexpr (kType == DType::kQ5_1) out->m = LoadHalf(blk + offsetof(BlockQ5_1, m));
    const uint8_t* qh = blk + offsetof(Block, qh);
    const uint32_t high = qh[0] | (qh[1] << 8) | (qh[2] << 16) | (static_cast<uint32_t>(qh[3]) << 24);
    const int offset = kType == DType::kQ5_0 ? 16 : 0;
    for (int j = 0; j < kQuantBlock; ++j) {
      out->q[j] = static_cast<int8_t>((Nibble(blk + offsetof(Block, qs), j) | (((high >> j) & 1) << 4)) - offset);
    }
  } else if constexpr (kType == DType::kQ2_K) {
    const uint8_t* blk = row + (b / 8) * sizeof(BlockQ2_K);
    for (int l = 0; l < kQuantBlock; ++l) out->q[l] = static_cast<int8_t>((blk[offsetof(BlockQ2_K, qs) + 32 * h + l] >> (2 * k)) & 3);
    for (int half = 0; half < 2; ++half) {
      const int packed = blk[offsetof(BlockQ2_K, scales) + 2 * s + half];
      out->scale[half] = packed & 0xf;
      out->min[half] = packed >> 4;
    }
    out->d = LoadHalf(blk + offsetof(BlockQ2_K, d));
    out->dmin = LoadHalf(blk + offsetof(BlockQ2_K, dmin));
  } else if constexpr (kType == DType::kQ3_K) {
    const uint8_t* blk = row + (b / 8) * sizeof(BlockQ3_K);
    for (int l = 0; l < kQuantBlock; ++l) {
      const int low = (blk[offsetof(BlockQ3_K, qs) + 32 * h + l] >> (2 * k)) & 3;
      const bool high = (blk[offsetof(BlockQ3_K, hmask) + l] >> s) & 1;
      out->q[l] = static_cast<int8_t>(low - (high ? 0 : 4));
    }
    for (int half = 0; half < 2; ++half) out->scale[half] = Q3KScale(blk + offsetof(BlockQ3_K, scales), 2 * s + half) - 32;
    out->d = LoadHalf(blk + offsetof(BlockQ3_K, d));
  } else if constexpr (kType == DType::kQ4_K || kType == DType::kQ5_K) {
    using Block = std::conditional_t<kType == DType::kQ4_K, BlockQ4_K, BlockQ5_K>;
    const uint8_t* blk = row + (b / 8) * sizeof(Block);
    for (int l = 0; l < kQuantBlock; ++l) {
      int v = (blk[offsetof(Block, qs) + 32 * (s / 2) + l] >> (4 * (s % 2))) & 0xf;
      if constexpr (kType == DType::kQ5_K) v |= ((blk[offsetof(BlockQ5_K, qh) + l] >> s) & 1) << 4;
      out->q[l] = static_cast<int8_t>(v);
    }
    int scale = 0, min = 0;
    KQuantScaleMin(blk + offsetof(Block, scales), s, &scale, &min);
    out->d = __fmul_rn(LoadHalf(blk + offsetof(Block, d)), static_cast<float>(scale));
    out->m = -__fmul_rn(LoadHalf(blk + offsetof(Block, dmin)), static_cast<float>(min));
  } else {
    static_assert(kType == DType::kQ6_K);
    const uint8_t* blk = row + (b / 8) * sizeof(BlockQ6_K);
    for (int l = 0; l < kQuantBlock; ++l) {
      const int low = (blk[offsetof(BlockQ6_K, ql) + 64 * h + 32 * (k % 2) + l] >> (4 * (k / 2))) & 0xf;
      const int high = (blk[offsetof(BlockQ6_K, qh) + 32 * h + l] >> (2 * k)) & 3;
      out->q[l] = static_cast<int8_t>((low | (high << 4)) - 32);
    }
    for (int half = 0; half < 2; ++half) out->scale[half] = static_cast<int8_t>(blk[offsetof(BlockQ6_K, scales) + 2 * s + half]);
    out->d = LoadHalf(blk + offsetof(BlockQ6_K, d));
  }
}

// Value j of a decoded block, rounded as DequantizeRow rounds it.
template <DType kType>
__device__ __forceinline__ float BlockValue(const DeviceQuantBlock& blk, int j) {
  const int half = j / 16;
  const float v = __fmul_rn(__fmul_rn(blk.d, static_cast<float>(blk.scale[half])), static_cast<float>(blk.q[j]));
  if constexpr (MinKindOf(kType) == MinKind::kOffset) return __fadd_rn(v, blk.m);
  if constexpr (MinKindOf(kType) == MinKind::kHalves) return __fsub_rn(v, __fmul_rn(blk.dmin, static_cast<float>(blk.min[half])));
  return v;
}

template <DType kType>
__device__ __forceinline__ float DequantizeQuantElement(const uint8_t* row, int64_t i) {
  DeviceQuantBlock blk;
  DecodeBlock<kType>(row, i / kQuantBlock, &blk);
  return BlockValue<kType>(blk, static_cast<int>(i % kQuantBlock));
}

// Element i of a row stored as `type` (a quantised element decodes its whole block: embedding rows only).
__device__ __forceinline__ float DequantizeElement(DType type, const uint8_t* row, int64_t i) {
  switch (type) {
    case DType::kF32: return reinterpret_cast<const float*>(row)[i];
    case DType::kF16: return HalfBitsToFloat(reinterpret_cast<const uint16_t*>(row)[i]);
    case DType::kBF16: return Bf16BitsToFloat(reinterpret_cast<const uint16_t*>(row)[i]);
    case DType::kQ8_0: return DequantizeQuantElement<DType::kQ8_0>(row, i);
    case DType::kQ4_0: return DequantizeQuantElement<DType::kQ4_0>(row, i);
    case DType::kQ4_1: return DequantizeQuantElement<DType::kQ4_1>(row, i);
    case DType::kQ5_0: return DequantizeQuantElement<DType::kQ5_0>(row, i);
    case DType::kQ5_1: return DequantizeQuantElement<DType::kQ5_1>(row, i);
    case DType::kQ2_K: return DequantizeQuantElement<DType::kQ2_K>(row, i);
    case DType::kQ3_K: return DequantizeQuantElement<DType::kQ3_K>(row, i);
    case DType::kQ4_K: return DequantizeQuantElement<DType::kQ4_K>(row, i);
    case DType::kQ5_K: return DequantizeQuantElement<DType::kQ5_K>(row, i);
    case DType::kQ6_K: return DequantizeQuantElement<DType::kQ6_K>(row, i);
  }
  return 0.0f;
}

}  // namespace tpserve::cuda
