// Internal to kernels/cpu/simd/matmul_quant.cc, AVX-512 with VNNI: one token (decode) against four weight
// rows at once, each row in one 128-bit lane of two zmm registers. `lo` holds the four rows' values 0..15,
// `hi` their values 16..31, so one VNNI dot of each against the activation's halves (broadcast to the four
// lanes) gives every row its 8 canonical integer lanes: lane i of row r is lane r·4 + i of `lo` (i < 4)
// or of `hi` (i >= 4). The 8-lane tiles spend a vector register on each row and do the scales' f16
// conversions, products and broadcasts row by row; here they are vector operations over four rows, about
// a third of the instructions per block (bench/README.md, "Decode over four rows").
//
// Every output sees exactly the operations of matmul_quant.cc's canonical order, in the same order:
// the same exact integer lanes, the same f32 products d_w · d_a (a product rounds the same in any lane),
// the same fma per lane and block, the same offset sum beside them, the same Fold8 tree (its first step
// a[i] + a[i + 4] is `lo` + `hi`), and for the fixed-point sums the same term per block. The ISA
// equality test holds this level to the portable one bit for bit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "common/dtype.h"
#include "common/quant_block.h"
#include "kernels/cpu/matmul_fixed_point.h"
#include "kernels/cpu/quantize_activations.h"
#include "kernels/cpu/simd/fixed_point_lanes.h"
#include "kernels/cpu/simd/intrinsics.h"
#include "kernels/cpu/simd/quant_unpack.h"

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512DQ__) && defined(__AVX512VNNI__)
#define TPSERVE_QUANT_ROW_QUADS 1

namespace tpserve::internal::TPSERVE_ISA_NS {

// The types read four rows at a time.
constexpr bool HasRowQuads(DType type) {
  return type == DType::kQ4_0 || type == DType::kQ4_1 || type == DType::kQ8_0;
}

// One block of four rows.
struct QuadBlock {
  __m512i lo, hi;  // values 0..15 and 16..31, row r in 128-bit lane r (Q8_0: signed, the others unsigned)
  __m128 d, m;     // the rows' d and (Q4_1) m
};

inline __m512i Load4x16(const uint8_t* p, int64_t stride) {
  const auto at = [&](int r) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + r * stride)); };
  __m512i v = _mm512_castsi128_si512(at(0));
  v = _mm512_inserti32x4(v, at(1), 1);
  v = _mm512_inserti32x4(v, at(2), 2);
  return _mm512_inserti32x4(v, at(3), 3);
}

inline uint16_t LoadU16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

// Four f16 scales stride bytes apart.
inline __m128 Load4Half(const uint8_t* p, int64_t stride) {
  __m128i h = _mm_cvtsi32_si128(LoadU16(p));
  h = _mm_insert_epi16(h, LoadU16(p + stride), 1);
  h = _mm_insert_epi16(h, LoadU16(p + 2 * stride), 2);
  h = _mm_insert_epi16(h, LoadU16(p + 3 * stride), 3);
  return _mm_cvtph_ps(h);
}

template <DType kType>
inline QuadBlock LoadQuad(const uint8_t* w, int64_t row_bytes, int64_t b) {
  QuadBlock q;
  if constexpr (kType == DType::kQ8_0) {
    const auto* blk = w + b * static_cast<int64_t>(sizeof(BlockQ8_0));
    q.lo = Load4x16(blk + offsetof(BlockQ8_0, qs), row_bytes);
    q.hi = Load4x16(blk + offsetof(BlockQ8_0, qs) + 16, row_bytes);
    q.d = Load4Half(blk, row_bytes);
    q.m = _mm_setzero_ps();
  } else {
    static_assert(kType == DType::kQ4_0 || kType == DType::kQ4_1);
    using Block = std::conditional_t<kType == DType::kQ4_0, BlockQ4_0, BlockQ4_1>;
    const auto* blk = w + b * static_cast<int64_t>(sizeof(Block));
    const __m512i packed = Load4x16(blk + offsetof(Block, qs), row_bytes);
    const __m512i nibble = _mm512_set1_epi8(0x0f);
    q.lo = _mm512_and_si512(packed, nibble);
    q.hi = _mm512_and_si512(_mm512_srli_epi16(packed, 4), nibble);
    q.d = Load4Half(blk, row_bytes);
    q.m = kType == DType::kQ4_1 ? Load4Half(blk + offsetof(BlockQ4_1, m), row_bytes) : _mm_setzero_ps();
  }
  return q;
}

// The activation block's halves, each in all four lanes, and (Q4_0) 8 · the sum of each 4 values.
struct QuadAct {
  __m512i lo, hi;
  __m512i lo_sum8 = _mm512_setzero_si512(), hi_sum8 = _mm512_setzero_si512();
};

template <DType kType>
inline QuadAct LoadQuadAct(const BlockQ8Act& a) {
  QuadAct qa;
  qa.lo = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a.qs)));
  qa.hi = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a.qs + 16)));
  if constexpr (kType == DType::kQ4_0) {
    const __m512i ones = _mm512_set1_epi8(1);
    qa.lo_sum8 = _mm512_slli_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), ones, qa.lo), 3);
    qa.hi_sum8 = _mm512_slli_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), ones, qa.hi), 3);
  }
  return qa;
}

// The exact integer lanes of one half: Σ_{j<4} w·a over the four values of each lane. Q4_0's w is q − 8,
// so its lane is Σ q·a − 8 Σ a; Q8_0's signed w goes through |w| · (a with w's sign).
template <DType kType>
inline __m512i QuadLanes(__m512i w, __m512i a, __m512i sum8) {
  const __m512i zero = _mm512_setzero_si512();
  if constexpr (kType == DType::kQ8_0) {
    return _mm512_dpbusd_epi32(zero, _mm512_abs_epi8(w), _mm512_mask_sub_epi8(a, _mm512_movepi8_mask(w), zero, a));
  } else if constexpr (kType == DType::kQ4_0) {
    return _mm512_sub_epi32(_mm512_dpbusd_epi32(zero, w, a), sum8);
  } else {
    (void)sum8;
    return _mm512_dpbusd_epi32(zero, w, a);
  }
}

// Lane group r of v set to s[r].
inline __m512 SpreadRows(__m128 s) {
  return _mm512_permutexvar_ps(_mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3),
                               _mm512_castps128_ps512(s));
}

// MatMul's reduction (FloatSums' per output).
struct FloatQuad {
  using Out = float;
  template <MinKind kMin>
  void Add(__m512i lo, __m512i hi, const QuadBlock& q, const BlockQ8Act& a) {
    const __m512 scale = SpreadRows(_mm_mul_ps(q.d, _mm_set1_ps(a.d)));
    acc_lo = _mm512_fmadd_ps(_mm512_cvtepi32_ps(lo), scale, acc_lo);
    acc_hi = _mm512_fmadd_ps(_mm512_cvtepi32_ps(hi), scale, acc_hi);
    if constexpr (kMin == MinKind::kOffset) acc_min = _mm_add_ps(acc_min, _mm_mul_ps(q.m, _mm_set1_ps(a.sum)));
  }
  // Fold8 per row: s[i] = a[i] + a[i + 4], then (s[0] + s[2]) + (s[1] + s[3]); plus the offset sum.
  void Store(float* y) const {
    const __m512 s = _mm512_add_ps(acc_lo, acc_hi);
    const __m512 pairs = _mm512_add_ps(s, _mm512_permute_ps(s, 0x4e));  // s0+s2, s1+s3 in each group
    const __m512 total = _mm512_add_ps(pairs, _mm512_permute_ps(pairs, 0xb1));
    const __m128 rows = _mm512_castps512_ps128(
        _mm512_permutexvar_ps(_mm512_setr_epi32(0, 4, 8, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0), total));
    _mm_storeu_ps(y, _mm_add_ps(rows, acc_min));
  }
  __m512 acc_lo = _mm512_setzero_ps(), acc_hi = _mm512_setzero_ps();
  __m128 acc_min = _mm_setzero_ps();
};

// MatMulFixedPoint's reduction (FixedSums' per block): f32(exact total) · f32((d·2^32) · d_a)
// [+ f32((m·2^32) · Σa)], rounded into int64 lane r.
struct FixedQuad {
  using Out = int64_t;
  template <MinKind kMin>
  void Add(__m512i lo, __m512i hi, const QuadBlock& q, const BlockQ8Act& a) {
    const __m512i s = _mm512_add_epi32(lo, hi);
    const __m512i pairs = _mm512_add_epi32(s, _mm512_shuffle_epi32(s, _MM_PERM_BADC));
    const __m512i total = _mm512_add_epi32(pairs, _mm512_shuffle_epi32(pairs, _MM_PERM_CDAB));
    const __m128i totals = _mm512_castsi512_si128(
        _mm512_permutexvar_epi32(_mm512_setr_epi32(0, 4, 8, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0), total));
    const __m128 scale = _mm_set1_ps(kFixedPointScale);  // exact: a power of two
    __m128 terms = _mm_mul_ps(_mm_cvtepi32_ps(totals), _mm_mul_ps(_mm_mul_ps(q.d, scale), _mm_set1_ps(a.d)));
    if constexpr (kMin == MinKind::kOffset) {
      terms = _mm_add_ps(terms, _mm_mul_ps(_mm_mul_ps(q.m, scale), _mm_set1_ps(a.sum)));
    }
    acc = _mm256_add_epi64(acc, RoundToFixed4(terms));
  }
  void Store(int64_t* y) const { _mm256_storeu_si256(reinterpret_cast<__m256i*>(y), acc); }
  __m256i acc = _mm256_setzero_si256();
};

// Four rows × one token; y: the four outputs.
template <DType kType, class Quad>
void QuadRowTile(const uint8_t* w, int64_t row_bytes, const uint8_t* x, int64_t, int64_t cols,
                 typename Quad::Out* y, int64_t) {
  Quad acc;
  const auto* act = reinterpret_cast<const BlockQ8Act*>(x);
  const int64_t num_blocks = cols / kQuantBlock;
  TilePrefetch<kType, 4> prefetch(w, row_bytes);
  for (int64_t b = 0; b < num_blocks; ++b) {
    prefetch.At(b);
    const QuadBlock q = LoadQuad<kType>(w, row_bytes, b);
    const QuadAct a = LoadQuadAct<kType>(act[b]);
    acc.template Add<MinKindOf(kType)>(QuadLanes<kType>(q.lo, a.lo, a.lo_sum8), QuadLanes<kType>(q.hi, a.hi, a.hi_sum8),
                                       q, act[b]);
  }
  acc.Store(y);
}

}  // namespace tpserve::internal::TPSERVE_ISA_NS

#endif
