// One 32-value block of any quantised type, decoded to small integers and its scales: the single
// place that knows ggml's element orders and scale packings. The reference dequantisation
// (DequantizeRow), the portable matmul kernel and the tests read blocks through it; the SIMD
// kernels unpack the same values with vector instructions and are tested against it.
//
// Every type's value j of a block is
//   x[j] = (d · scale[j / 16]) · q[j]   (+ m)   (− dmin · min[j / 16])
// with the terms in brackets present for the types that have them (MinKindOf). All products are
// exact in f32 (d is an fp16, scale and q have few bits), so only the offset rounds, once, as in ggml.
#pragma once

#include <cstdint>

#include "common/dtype.h"

// The K-quants' packed scales and the type traits are shared with the CUDA twins (kernels/cuda/dequantize.cuh).
#if defined(__CUDACC__)
#define TPSERVE_HOST_DEVICE __host__ __device__
#else
#define TPSERVE_HOST_DEVICE
#endif

namespace tpserve {

// How a type's minimum enters its values.
enum class MinKind {
  kNone,    // Q8_0, Q4_0, Q5_0, Q3_K, Q6_K: symmetric
  kOffset,  // Q4_1, Q5_1 (+m), Q4_K, Q5_K (−dmin·min of the 32-value group, held as m): one offset
  kHalves,  // Q2_K: −dmin·min[h], a different integer minimum for each half of 16
};
// (constexpr: the kernels branch on them at compile time.)
constexpr TPSERVE_HOST_DEVICE MinKind MinKindOf(DType type) {
  switch (type) {
    case DType::kQ4_1: case DType::kQ5_1: case DType::kQ4_K: case DType::kQ5_K: return MinKind::kOffset;
    case DType::kQ2_K: return MinKind::kHalves;
    default: return MinKind::kNone;
  }
}
// True when the two halves of a block carry their own integer scales (Q2_K, Q3_K, Q6_K; their
// groups are 16 values). Q4_K and Q5_K fold their 6-bit group scale into d (exact).
constexpr TPSERVE_HOST_DEVICE bool HasHalfScales(DType type) {
  return type == DType::kQ2_K || type == DType::kQ3_K || type == DType::kQ6_K;
}

struct QuantBlock {
  int8_t q[kQuantBlock];  // values with offsets removed (Q4_0: q − 8, Q5_0: q − 16, Q6_K: q − 32, ...)
  int32_t scale[2];       // integer scale of values [0, 16) and [16, 32); 1 without half scales
  int32_t min[2];         // kHalves: integer minimum of each half; 0 otherwise
  float d;                // fp16 d (Q4_K, Q5_K: d · group scale, exact)
  float m;                // kOffset: the offset added to every value (Q4_K/Q5_K: −dmin · group min, exact)
  float dmin;             // kHalves: fp16 dmin
};

// Decodes block b (values [32·b, 32·b + 32)) of a row of `type` starting at `row`.
// REQUIRES: IsQuantized(type).
void DecodeQuantBlock(DType type, const void* row, int64_t b, QuantBlock* out);

// The K-quants' packed scales. static: every translation unit (each ISA level, each CUDA file) keeps
// its own copy, so no level's instructions can reach another level through a merged inline function.

// The 6-bit scale and minimum of group j (0..7) of a Q4_K/Q5_K super-block's 12 packed bytes: groups
// 0..3 in the low 6 bits of bytes 0..3 (scales) and 4..7 (mins); groups 4..7 in the nibbles of bytes
// 8..11 with their top 2 bits in the top bits of bytes 0..7.
static inline TPSERVE_HOST_DEVICE void KQuantScaleMin(const uint8_t* scales, int j, int* scale, int* min) {
  if (j < 4) {
    *scale = scales[j] & 63;
    *min = scales[j + 4] & 63;
  } else {
    *scale = (scales[j + 4] & 0xf) | ((scales[j - 4] >> 6) << 4);
    *min = (scales[j + 4] >> 4) | ((scales[j] >> 6) << 4);
  }
}

// The 6-bit scale (0..63, stored with a bias of 32) of group j (0..15) of a Q3_K super-block. Low 4
// bits: bytes 0..7 (low nibbles for groups 0..7, high nibbles for 8..15); high 2 bits: bytes 8..11,
// two bits per group in the order groups 0-3 (bits 0-1), 4-7 (bits 2-3), 8-11 (4-5), 12-15 (6-7).
static inline TPSERVE_HOST_DEVICE int Q3KScale(const uint8_t* scales, int j) {
  const int low = j < 8 ? scales[j] & 0xf : scales[j - 8] >> 4;
  const int high = (scales[8 + j % 4] >> (2 * (j / 4))) & 3;
  return low | (high << 4);
}

}  // namespace tpserve
