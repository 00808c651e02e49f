// Internal to kernels/cpu/simd/matmul_quant.cc (AVX2 and AVX-512 levels): one 32-value weight block of
// any quantised type unpacked into a vector of 32 bytes, with the scales the dot needs. The values
// and scales are those of DecodeQuantBlock (common/quant_block.h), which the portable level uses and
// the ISA equality test compares against.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "common/dtype.h"
#include "common/quant_block.h"
#include "kernels/cpu/simd/intrinsics.h"
#include "kernels/cpu/simd/tile_prefetch.h"

namespace tpserve::internal::TPSERVE_ISA_NS {

inline float Half(uint16_t h) { return _cvtsh_ss(h); }

// One weight block, unpacked for the dot with any number of tokens.
struct WeightBlock {
  __m256i q;            // 32 values: signed, or unsigned for the types with a minimum (kUnsigned)
  __m256i lane_scale;   // half-scale types: lanes 0..3 the first half's integer scale, 4..7 the second's
  __m256i lane_min;     // Q2_K: the same for the integer minimums
  float d = 0.0f;       // as QuantBlock::d
  float m = 0.0f;       // MinKind::kOffset
  float dmin = 0.0f;    // MinKind::kHalves
};

// True for the types whose stored values are unsigned (those with a minimum): dotted as u8 × s8.
constexpr bool IsUnsignedQuant(DType type) { return MinKindOf(type) != MinKind::kNone; }

// 16 packed bytes → 32 nibbles in element order (low nibbles are elements 0..15).
inline __m256i UnpackNibbles(const uint8_t* qs) {
  const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m128i m = _mm_set1_epi8(0x0f);
  return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(b, 4), m), _mm_and_si128(b, m));
}

// Q5_0/Q5_1: byte j = 0x10 where bit j of the 32-bit qh is set, else 0.
inline __m256i FifthBits(const uint8_t* qh_bytes) {
  uint32_t qh;
  std::memcpy(&qh, qh_bytes, 4);
  // Byte j takes byte j / 8 of qh, then tests its bit j % 8.
  const __m256i spread = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(qh)),
                                             _mm256_setr_epi64x(0, 0x0101010101010101, 0x0202020202020202,
                                                                0x0303030303030303));
  const __m256i bit = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ull));
  const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit);
  return _mm256_and_si256(set, _mm256_set1_epi8(0x10));
}

// (v >> shift) & mask per byte, for a run-time shift.
inline __m256i ShiftMask(__m256i v, int shift, int mask) {
  return _mm256_and_si256(_mm256_srl_epi16(v, _mm_cvtsi32_si128(shift)), _mm256_set1_epi8(static_cast<char>(mask)));
}

inline __m256i Load32(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }

// Eight int32 lanes, lane i = Σ_{j<4} u[4i+j] * s[4i+j] for unsigned u and signed s bytes. Without VNNI
// (maddubs, then madd with ones) each pair u·s + u·s must fit int16: callers keep |s| <= 127 beside
// u <= 128, or u <= 63, or |s| <= 32 beside any u.
inline __m256i DotU8S8(__m256i u, __m256i s) {
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
  return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s);
#else
  return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
#endif
}
// Signed × signed through the sign trick: |w| · (a with w's sign).
inline __m256i DotS8S8(__m256i w, __m256i a) { return DotU8S8(_mm256_sign_epi8(w, w), _mm256_sign_epi8(a, w)); }

// Lanes 0..3 = a, 4..7 = b.
inline __m256i HalfLanes(int a, int b) { return _mm256_setr_epi32(a, a, a, a, b, b, b, b); }

template <DType kType>
inline WeightBlock LoadBlock(const uint8_t* row, int64_t b) {
  WeightBlock wb;
  wb.lane_scale = wb.lane_min = _mm256_setzero_si256();
  // K-quants: group s of super-block b / 8; half h (128 values) and quarter k within it (s = 4h + k).
  const int s = static_cast<int>(b % 8), h = s / 4, k = s % 4;
  if constexpr (kType == DType::kQ8_0) {
    const auto* blk = reinterpret_cast<const BlockQ8_0*>(row) + b;
    wb.q = Load32(reinterpret_cast<const uint8_t*>(blk->qs));
    wb.d = Half(blk->d);
  } else if constexpr (kType == DType::kQ4_0) {
    const auto* blk = reinterpret_cast<const BlockQ4_0*>(row) + b;
    wb.q = _mm256_sub_epi8(UnpackNibbles(blk->qs), _mm256_set1_epi8(8));
    wb.d = Half(blk->d);
  } else if constexpr (kType == DType::kQ4_1) {
    const auto* blk = reinterpret_cast<const BlockQ4_1*>(row) + b;
    wb.q = UnpackNibbles(blk->qs);
    wb.d = Half(blk->d);
    wb.m = Half(blk->m);
  } else if constexpr (kType == DType::kQ5_0) {
    const auto* blk = reinterpret_cast<const BlockQ5_0*>(row) + b;
    wb.q = _mm256_sub_epi8(_mm256_or_si256(UnpackNibbles(blk->qs), FifthBits(blk->qh)), _mm256_set1_epi8(16));
    wb.d = Half(blk->d);
  } else if constexpr (kType == DType::kQ5_1) {
    const auto* blk = reinterpret_cast<const BlockQ5_1*>(row) + b;
    wb.q = _mm256_or_si256(UnpackNibbles(blk->qs), FifthBits(blk->qh));
    wb.d = Half(blk->d);
    wb.m = Half(blk->m);
  } else if constexpr (kType == DType::kQ2_K) {
    const auto* blk = reinterpret_cast<const BlockQ2_K*>(row) + b / 8;
    wb.q = ShiftMask(Load32(blk->qs + 32 * h), 2 * k, 3);
    const int lo = blk->scales[2 * s], hi = blk->scales[2 * s + 1];
    wb.lane_scale = HalfLanes(lo & 0xf, hi & 0xf);
    wb.lane_min = HalfLanes(lo >> 4, hi >> 4);
    wb.d = Half(blk->d);
    wb.dmin = Half(blk->dmin);
  } else if constexpr (kType == DType::kQ3_K) {
    const auto* blk = reinterpret_cast<const BlockQ3_K*>(row) + b / 8;
    const __m256i low = ShiftMask(Load32(blk->qs + 32 * h), 2 * k, 3);
    const __m256i high = _mm256_slli_epi16(ShiftMask(Load32(blk->hmask), s, 1), 2);  // 4 where the bit is set
    wb.q = _mm256_sub_epi8(_mm256_or_si256(low, high), _mm256_set1_epi8(4));
    wb.lane_scale = HalfLanes(Q3KScale(blk->scales, 2 * s) - 32, Q3KScale(blk->scales, 2 * s + 1) - 32);
    wb.d = Half(blk->d);
  } else if constexpr (kType == DType::kQ4_K || kType == DType::kQ5_K) {
    using Block = std::conditional_t<kType == DType::kQ4_K, BlockQ4_K, BlockQ5_K>;
    const auto* blk = reinterpret_cast<const Block*>(row) + b / 8;
    wb.q = ShiftMask(Load32(blk->qs + 32 * (s / 2)), 4 * (s % 2), 0xf);
    if constexpr (kType == DType::kQ5_K) {
      wb.q = _mm256_or_si256(wb.q, _mm256_slli_epi16(ShiftMask(Load32(blk->qh), s, 1), 4));
    }
    int scale = 0, min = 0;
    KQuantScaleMin(blk->scales, s, &scale, &min);
    wb.d = Half(blk->d) * static_cast<float>(scale);
    wb.m = -(Half(blk->dmin) * static_cast<float>(min));
  } else {
    static_assert(kType == DType::kQ6_K);
    const auto* blk = reinterpret_cast<const BlockQ6_K*>(row) + b / 8;
    const __m256i low = ShiftMask(Load32(blk->ql + 64 * h + 32 * (k % 2)), 4 * (k / 2), 0xf);
    const __m256i high = _mm256_slli_epi16(ShiftMask(Load32(blk->qh + 32 * h), 2 * k, 3), 4);
    wb.q = _mm256_sub_epi8(_mm256_or_si256(low, high), _mm256_set1_epi8(32));
    wb.lane_scale = HalfLanes(blk->scales[2 * s], blk->scales[2 * s + 1]);
    wb.d = Half(blk->d);
  }
  return wb;
}

// Bytes of 256 values of a type: one super-block, or 8 blocks of 32.
template <DType kType>
constexpr int64_t kBytesPer256 = kType == DType::kQ8_0   ? 8 * sizeof(BlockQ8_0)
                                 : kType == DType::kQ4_0 ? 8 * sizeof(BlockQ4_0)
                                 : kType == DType::kQ4_1 ? 8 * sizeof(BlockQ4_1)
                                 : kType == DType::kQ5_0 ? 8 * sizeof(BlockQ5_0)
                                 : kType == DType::kQ5_1 ? 8 * sizeof(BlockQ5_1)
                                 : kType == DType::kQ2_K ? sizeof(BlockQ2_K)
                                 : kType == DType::kQ3_K ? sizeof(BlockQ3_K)
                                 : kType == DType::kQ4_K ? sizeof(BlockQ4_K)
                                 : kType == DType::kQ5_K ? sizeof(BlockQ5_K)
                                                         : sizeof(BlockQ6_K);

}  // namespace tpserve::internal::TPSERVE_ISA_NS
