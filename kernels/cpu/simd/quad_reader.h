// Internal to the AVX2 and AVX-512 levels' four-lane decode paths (quant_row_quads.h, quant_row_stream_avx512.h):
// QuadReader reads a 32-value block from each of four places `stride` bytes apart into a QuadVec's four lanes
// (row r in lane r): four rows' block b (the row quads), or one row's four blocks (the row stream).
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "common/dtype.h"
#include "common/quant_block.h"
#include "kernels/cpu/simd/intrinsics.h"
#include "kernels/cpu/simd/quant_quad_basics.h"

#if TPSERVE_QUANT_AVX512
#include "kernels/cpu/simd/quad_lanes_avx512.h"
#else
#include "kernels/cpu/simd/quad_lanes_avx2.h"
#endif

namespace tpserve::internal::TPSERVE_ISA_NS {

// The block of the 32-value block types (the K-quants' is a super-block of 256).
template <DType kType>
using BlockOf = std::conditional_t<
    kType == DType::kQ8_0, BlockQ8_0,
    std::conditional_t<kType == DType::kQ4_0, BlockQ4_0,
                       std::conditional_t<kType == DType::kQ4_1, BlockQ4_1,
                                          std::conditional_t<kType == DType::kQ5_0, BlockQ5_0, BlockQ5_1>>>>;

// One block of four rows.
struct QuadBlock {
  QuadVec lo, hi;  // values 0..15 and 16..31, row r in 128-bit lane r (Q8_0: signed, the others unsigned)
  __m128 d, m;     // the rows' d and (offset types) m
  QuadVec lo_scale = ZeroQuad(), hi_scale = ZeroQuad();  // Q6_K: each row's integer scale of the half, in its lane
};

// Reads block after block of four adjacent rows, row_bytes apart (the row stream gives it one row's blocks,
// a block's size apart, as its four rows: only the 32-value block types read so). The K-quants' per-group
// scales (and Q6_K's d, Q5_K's fifth bits) are read once per super-block for the four rows; Q4_K and Q5_K
// decode their 6-bit scales and mins in vectors, with LoadBlock's products.
template <DType kType>
class QuadReader {
 public:
  QuadReader(const uint8_t* w, int64_t row_bytes) : w_(w), row_bytes_(row_bytes) {}

  QuadBlock Load(int64_t b) {
    QuadBlock q;
    q.m = _mm_setzero_ps();
    if constexpr (kType == DType::kQ8_0) {
      const uint8_t* blk = w_ + b * static_cast<int64_t>(sizeof(BlockQ8_0));
      q.lo = Load4x16(blk + offsetof(BlockQ8_0, qs), row_bytes_);
      q.hi = Load4x16(blk + offsetof(BlockQ8_0, qs) + 16, row_bytes_);
      q.d = Load4Half(blk, row_bytes_);
    } else if constexpr (kType == DType::kQ4_0 || kType == DType::kQ4_1 || kType == DType::kQ5_0 ||
                         kType == DType::kQ5_1) {
      using Block = BlockOf<kType>;
      const uint8_t* blk = w_ + b * static_cast<int64_t>(sizeof(Block));
      const QuadVec packed = Load4x16(blk + offsetof(Block, qs), row_bytes_);
      q.lo = ShiftMask(packed, 0, 0x0f);
      q.hi = ShiftMask(packed, 4, 0x0f);
      if constexpr (kType == DType::kQ5_0 || kType == DType::kQ5_1) {
        ReadQ5Header<kType>(blk, row_bytes_, &q.lo, &q.hi, &q.d, &q.m);
      } else if constexpr (MinKindOf(kType) == MinKind::kOffset) {
        static_assert(offsetof(Block, m) == offsetof(Block, d) + 2);
        Load4HalfPairs(blk + offsetof(Block, d), row_bytes_, &q.d, &q.m);
      } else {
        q.d = Load4Half(blk, row_bytes_);
      }
    } else {
      const int s = static_cast<int>(b % 8);  // the 32-value group of the super-block
      if (s == 0) DecodeScales(b / 8);
      using Block = std::conditional_t<kType == DType::kQ4_K, BlockQ4_K,
                                       std::conditional_t<kType == DType::kQ5_K, BlockQ5_K, BlockQ6_K>>;
      const uint8_t* blk = w_ + (b / 8) * static_cast<int64_t>(sizeof(Block));
      if constexpr (kType == DType::kQ4_K || kType == DType::kQ5_K) {
        const uint8_t* qs = blk + offsetof(Block, qs) + 32 * (s / 2);
        q.lo = ShiftMask(Load4x16(qs, row_bytes_), 4 * (s % 2), 0xf);
        q.hi = ShiftMask(Load4x16(qs + 16, row_bytes_), 4 * (s % 2), 0xf);
        if constexpr (kType == DType::kQ5_K) {
          q.lo = Or(q.lo, ShiftLeft4(ShiftMask(qh_lo_, s, 1)));
          q.hi = Or(q.hi, ShiftLeft4(ShiftMask(qh_hi_, s, 1)));
        }
        q.d = _mm_load_ps(group_d_[s]);
        q.m = _mm_load_ps(group_m_[s]);
      } else {
        static_assert(kType == DType::kQ6_K);
        const int h = s / 4, k = s % 4;
        const uint8_t* ql = blk + offsetof(BlockQ6_K, ql) + 64 * h + 32 * (k % 2);
        const uint8_t* qh = blk + offsetof(BlockQ6_K, qh) + 32 * h;
        q.lo = Or(ShiftMask(Load4x16(ql, row_bytes_), 4 * (k / 2), 0xf),
                  ShiftLeft4(ShiftMask(Load4x16(qh, row_bytes_), 2 * k, 3)));
        q.hi = Or(ShiftMask(Load4x16(ql + 16, row_bytes_), 4 * (k / 2), 0xf),
                  ShiftLeft4(ShiftMask(Load4x16(qh + 16, row_bytes_), 2 * k, 3)));
        q.d = super_d_;
        q.lo_scale = HalfScale(scales_, 2 * s);
        q.hi_scale = HalfScale(scales_, 2 * s + 1);
      }
    }
    return q;
  }

 private:
  void DecodeScales(int64_t super) {
    if constexpr (kType == DType::kQ4_K || kType == DType::kQ5_K) {
      // KQuantScaleMin for the four rows at once, row r in 32-bit lane r: word k holds scale bytes 4k..4k+3,
      // and byte j of the results below is group j's (0-3) or group 4 + j's 6-bit value. Scalar, this took
      // 32 decodes and 64 products per super-block, more instructions than its 32 blocks' dots.
      using Block = std::conditional_t<kType == DType::kQ4_K, BlockQ4_K, BlockQ5_K>;
      const uint8_t* blk = w_ + super * static_cast<int64_t>(sizeof(Block));
      auto word = [&](int k) {
        const uint8_t* p = blk + offsetof(Block, scales) + 4 * k;
        return _mm_setr_epi32(LoadI32(p), LoadI32(p + row_bytes_), LoadI32(p + 2 * row_bytes_),
                              LoadI32(p + 3 * row_bytes_));
      };
      const __m128i w0 = word(0), w1 = word(1), w2 = word(2);
      const __m128i low6 = _mm_set1_epi8(0x3f), low4 = _mm_set1_epi8(0x0f), bits45 = _mm_set1_epi8(0x30);
      // (byte >> 6) << 4 is (word >> 2) & 0x30 per byte.
      const __m128i scale_lo = _mm_and_si128(w0, low6), min_lo = _mm_and_si128(w1, low6);
      const __m128i scale_hi = _mm_or_si128(_mm_and_si128(w2, low4), _mm_and_si128(_mm_srli_epi32(w0, 2), bits45));
      const __m128i min_hi =
          _mm_or_si128(_mm_and_si128(_mm_srli_epi32(w2, 4), low4), _mm_and_si128(_mm_srli_epi32(w1, 2), bits45));
      if constexpr (kType == DType::kQ5_K) {  // the fifth bits of all 8 groups: bit s of each byte
        qh_lo_ = Load4x16(blk + offsetof(BlockQ5_K, qh), row_bytes_);
        qh_hi_ = Load4x16(blk + offsetof(BlockQ5_K, qh) + 16, row_bytes_);
      }
      const __m128 d = Load4Half(blk + offsetof(Block, d), row_bytes_);
      const __m128 dmin = Load4Half(blk + offsetof(Block, dmin), row_bytes_);
      const __m128 sign = _mm_set1_ps(-0.0f);
      for (int j = 0; j < 4; ++j) {
        const __m128i pick = _mm_setr_epi8(static_cast<char>(j), -1, -1, -1, static_cast<char>(4 + j), -1, -1, -1,
                                           static_cast<char>(8 + j), -1, -1, -1, static_cast<char>(12 + j), -1, -1, -1);
        auto value = [&](__m128i v) { return _mm_cvtepi32_ps(_mm_shuffle_epi8(v, pick)); };
        _mm_store_ps(group_d_[j], _mm_mul_ps(d, value(scale_lo)));
        _mm_store_ps(group_d_[4 + j], _mm_mul_ps(d, value(scale_hi)));
        _mm_store_ps(group_m_[j], _mm_xor_ps(_mm_mul_ps(dmin, value(min_lo)), sign));  // −(dmin · min), exact
        _mm_store_ps(group_m_[4 + j], _mm_xor_ps(_mm_mul_ps(dmin, value(min_hi)), sign));
      }
    } else if constexpr (kType == DType::kQ6_K) {
      const uint8_t* blk = w_ + super * static_cast<int64_t>(sizeof(BlockQ6_K));
      super_d_ = Load4Half(blk + offsetof(BlockQ6_K, d), row_bytes_);
      scales_ = Load4x16(blk + offsetof(BlockQ6_K, scales), row_bytes_);
    } else {
      (void)super;
    }
  }

  const uint8_t* w_;
  int64_t row_bytes_;
  alignas(16) float group_d_[8][4], group_m_[8][4];  // Q4_K, Q5_K: [group][row], set at each super-block
  QuadVec scales_ = ZeroQuad();                       // Q6_K: each row's 16 int8 scales, in its lane
  QuadVec qh_lo_ = ZeroQuad(), qh_hi_ = ZeroQuad();   // Q5_K: each row's qh bytes 0..15 and 16..31
  __m128 super_d_ = _mm_setzero_ps();
};

}  // namespace tpserve::internal::TPSERVE_ISA_NS
