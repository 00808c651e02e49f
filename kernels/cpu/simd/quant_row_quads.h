// Internal to kernels/cpu/simd/matmul_quant.cc, AVX-512 with VNNI: one token (decode) against four weight
// rows at once, each row in one 128-bit lane of two zmm registers. `lo` holds the four rows' values 0..15,
// `hi` their values 16..31, so one VNNI dot of each against the activation's halves (broadcast to the four
// lanes) gives every row its 8 canonical integer lanes: lane i of row r is lane r·4 + i of `lo` (i < 4)
// or of `hi` (i >= 4). The 8-lane tiles spend a vector register on each row and do the scales' f16
// conversions, products and broadcasts row by row; here they are vector operations over four rows, about
// a third of the instructions per block (bench/README.md, "Decode over four rows"). QuadRows broadcasts
// the token's activation blocks (and the biased types' bias · Σa) once per call, not once per four rows,
// and leaves the last num_rows % 4 rows to the tiles. Integer lanes are
// exact, so the types stored with a bias (Q4_0, Q5_0, Q6_K: w = q − bias) dot the unsigned q and subtract
// bias · Σa, the same integers as the 8-lane tiles' signed dot.
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
#include <vector>

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

// The types read four rows at a time (the others, Q2_K and Q3_K, keep the 8-lane tiles).
constexpr bool HasRowQuads(DType type) {
  switch (type) {
    case DType::kQ8_0: case DType::kQ4_0: case DType::kQ4_1: case DType::kQ5_0: case DType::kQ5_1:
    case DType::kQ4_K: case DType::kQ5_K: case DType::kQ6_K: return true;
    default: return false;
  }
}

// The signed types stored as unsigned q with a bias (w = q − bias): their lanes are Σ q·a − bias·Σa.
// Q8_0 (stored signed) has 0 here and goes through the sign trick instead.
template <DType kType>
constexpr int kBiasShift = kType == DType::kQ4_0 ? 3 : kType == DType::kQ5_0 ? 4 : kType == DType::kQ6_K ? 5 : -1;

// One block of four rows.
struct QuadBlock {
  __m512i lo, hi;  // values 0..15 and 16..31, row r in 128-bit lane r (Q8_0: signed, the others unsigned)
  __m128 d, m;     // the rows' d and (offset types) m
  __m512i lo_scale = _mm512_setzero_si512(), hi_scale = _mm512_setzero_si512();  // Q6_K: each row's integer scale of the half, in its lane group
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

// (v >> shift) & mask per byte.
inline __m512i ShiftMask(__m512i v, int shift, int mask) {
  return _mm512_and_si512(_mm512_srl_epi16(v, _mm_cvtsi32_si128(shift)), _mm512_set1_epi8(static_cast<char>(mask)));
}

// The permutation that fills lane group r (four 32-bit elements) with element r.
inline __m512i RowGroups() { return _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3); }

// Q5_0/Q5_1: 0x10 in the bytes whose fifth bit is set. Bit j of row r's 32-bit qh is value j of the row:
// bits 0..15 go to `lo`'s lane r, 16..31 to `hi`'s.
inline void AddFifthBits(const uint8_t* qh, int64_t stride, __m512i* lo, __m512i* hi) {
  uint32_t bits[4];
  for (int r = 0; r < 4; ++r) std::memcpy(&bits[r], qh + r * stride, 4);
  const __m512i rows = _mm512_permutexvar_epi32(RowGroups(),
                                                _mm512_castsi128_si512(_mm_loadu_si128(reinterpret_cast<const __m128i*>(bits))));
  // Byte j of a lane takes byte j / 8 of its qh half, then tests bit j % 8.
  const __m512i lo_bytes = _mm512_set4_epi64(0x0101010101010101, 0, 0x0101010101010101, 0);
  const __m512i hi_bytes = _mm512_set4_epi64(0x0303030303030303, 0x0202020202020202, 0x0303030303030303,
                                             0x0202020202020202);
  const __m512i bit = _mm512_set1_epi64(static_cast<int64_t>(0x8040201008040201ull));
  const __m512i fifth = _mm512_set1_epi8(0x10);
  *lo = _mm512_or_si512(*lo, _mm512_maskz_mov_epi8(_mm512_test_epi8_mask(_mm512_shuffle_epi8(rows, lo_bytes), bit), fifth));
  *hi = _mm512_or_si512(*hi, _mm512_maskz_mov_epi8(_mm512_test_epi8_mask(_mm512_shuffle_epi8(rows, hi_bytes), bit), fifth));
}

// Reads block after block of four adjacent rows. The K-quants' per-group scales (and Q6_K's d) are
// decoded once per super-block for the four rows, with the scalar operations of LoadBlock.
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
      using Block = std::conditional_t<
          kType == DType::kQ4_0, BlockQ4_0,
          std::conditional_t<kType == DType::kQ4_1, BlockQ4_1,
                             std::conditional_t<kType == DType::kQ5_0, BlockQ5_0, BlockQ5_1>>>;
      const uint8_t* blk = w_ + b * static_cast<int64_t>(sizeof(Block));
      const __m512i packed = Load4x16(blk + offsetof(Block, qs), row_bytes_);
      q.lo = ShiftMask(packed, 0, 0x0f);
      q.hi = ShiftMask(packed, 4, 0x0f);
      if constexpr (kType == DType::kQ5_0 || kType == DType::kQ5_1) {
        AddFifthBits(blk + offsetof(Block, qh), row_bytes_, &q.lo, &q.hi);
      }
      q.d = Load4Half(blk, row_bytes_);
      if constexpr (MinKindOf(kType) == MinKind::kOffset) q.m = Load4Half(blk + offsetof(Block, m), row_bytes_);
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
          const uint8_t* qh = blk + offsetof(BlockQ5_K, qh);
          q.lo = _mm512_or_si512(q.lo, _mm512_slli_epi16(ShiftMask(Load4x16(qh, row_bytes_), s, 1), 4));
          q.hi = _mm512_or_si512(q.hi, _mm512_slli_epi16(ShiftMask(Load4x16(qh + 16, row_bytes_), s, 1), 4));
        }
        q.d = _mm_load_ps(group_d_[s]);
        q.m = _mm_load_ps(group_m_[s]);
      } else {
        static_assert(kType == DType::kQ6_K);
        const int h = s / 4, k = s % 4;
        const uint8_t* ql = blk + offsetof(BlockQ6_K, ql) + 64 * h + 32 * (k % 2);
        const uint8_t* qh = blk + offsetof(BlockQ6_K, qh) + 32 * h;
        q.lo = _mm512_or_si512(ShiftMask(Load4x16(ql, row_bytes_), 4 * (k / 2), 0xf),
                               _mm512_slli_epi16(ShiftMask(Load4x16(qh, row_bytes_), 2 * k, 3), 4));
        q.hi = _mm512_or_si512(ShiftMask(Load4x16(ql + 16, row_bytes_), 4 * (k / 2), 0xf),
                               _mm512_slli_epi16(ShiftMask(Load4x16(qh + 16, row_bytes_), 2 * k, 3), 4));
        q.d = super_d_;
        q.lo_scale = HalfScale(2 * s);
        q.hi_scale = HalfScale(2 * s + 1);
      }
    }
    return q;
  }

 private:
  void DecodeScales(int64_t super) {
    if constexpr (kType == DType::kQ4_K || kType == DType::kQ5_K) {
      using Block = std::conditional_t<kType == DType::kQ4_K, BlockQ4_K, BlockQ5_K>;
      for (int r = 0; r < 4; ++r) {
        const auto* blk = reinterpret_cast<const Block*>(w_ + r * row_bytes_) + super;
        const float d = Half(blk->d), dmin = Half(blk->dmin);
        for (int s = 0; s < 8; ++s) {
          int scale = 0, min = 0;
          KQuantScaleMin(blk->scales, s, &scale, &min);
          group_d_[s][r] = d * static_cast<float>(scale);
          group_m_[s][r] = -(dmin * static_cast<float>(min));
        }
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
  // Q6_K: its super-block's int8 scales of 16 values, row r's in lane r; each row's half h, sign-extended
  // into the four int32 of its lane group (byte h moved to the top byte of each, then shifted down).
  __m512i HalfScale(int h) const {
    return _mm512_srai_epi32(_mm512_shuffle_epi8(scales_, _mm512_set1_epi32(static_cast<int>((h << 24) | 0x808080))), 24);
  }

  alignas(16) float group_d_[8][4], group_m_[8][4];  // Q4_K, Q5_K: [group][row], set at each super-block
  __m512i scales_ = _mm512_setzero_si512();           // Q6_K
  __m128 super_d_ = _mm_setzero_ps();
};

// The activation block's halves, each in all four lanes, and (biased types) bias · the sum of each 4 values.
struct QuadAct {
  __m512i lo, hi;
  __m512i lo_bias = _mm512_setzero_si512(), hi_bias = _mm512_setzero_si512();
};

template <DType kType>
inline QuadAct LoadQuadAct(const BlockQ8Act& a) {
  QuadAct qa;
  qa.lo = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a.qs)));
  qa.hi = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a.qs + 16)));
  if constexpr (kBiasShift<kType> >= 0) {
    const __m512i ones = _mm512_set1_epi8(1);
    qa.lo_bias = _mm512_slli_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), ones, qa.lo), kBiasShift<kType>);
    qa.hi_bias = _mm512_slli_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), ones, qa.hi), kBiasShift<kType>);
  }
  return qa;
}

// The exact integer lanes of one half: Σ_{j<4} w·a over the four values of each lane (times the half's
// integer scale for Q6_K). A biased type's lane is Σ q·a − bias·Σa; Q8_0's signed w goes through
// |w| · (a with w's sign).
template <DType kType>
inline __m512i QuadLanes(__m512i w, __m512i a, __m512i bias_sum, __m512i scale) {
  const __m512i zero = _mm512_setzero_si512();
  __m512i dot;
  if constexpr (kType == DType::kQ8_0) {
    dot = _mm512_dpbusd_epi32(zero, _mm512_abs_epi8(w), _mm512_mask_sub_epi8(a, _mm512_movepi8_mask(w), zero, a));
  } else {
    dot = _mm512_dpbusd_epi32(zero, w, a);
  }
  if constexpr (kBiasShift<kType> >= 0) dot = _mm512_sub_epi32(dot, bias_sum);
  if constexpr (HasHalfScales(kType)) dot = _mm512_mullo_epi32(dot, scale);
  (void)bias_sum;
  (void)scale;
  return dot;
}

// Lane group r of v set to s[r].
inline __m512 SpreadRows(__m128 s) {
  return _mm512_permutexvar_ps(RowGroups(), _mm512_castps128_ps512(s));
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

// Four rows × one token against the token's prepared blocks; y: the four outputs.
template <DType kType, class Quad>
void QuadPass(const uint8_t* w, int64_t row_bytes, const BlockQ8Act* act, const QuadAct* acts, int64_t num_blocks,
              typename Quad::Out* y) {
  Quad acc;
  TilePrefetch<kBytesPer256<kType>, 4, true> prefetch(w, row_bytes);
  QuadReader<kType> reader(w, row_bytes);
  for (int64_t b = 0; b < num_blocks; ++b) {
    prefetch.At(b * kQuantBlock);
    const QuadBlock q = reader.Load(b);
    const QuadAct& a = acts[b];
    acc.template Add<MinKindOf(kType)>(QuadLanes<kType>(q.lo, a.lo, a.lo_bias, q.lo_scale),
                                       QuadLanes<kType>(q.hi, a.hi, a.hi_bias, q.hi_scale), q, act[b]);
  }
  acc.Store(y);
}

// RowsFn (matmul_tile.h): the token's blocks broadcast (and their biased sums) once, then every whole
// quad of rows; the last num_rows % 4 rows are left to the tiles.
template <DType kType, class Quad>
int64_t QuadRows(const uint8_t* w, int64_t row_bytes, int64_t num_rows, const uint8_t* x, int64_t cols,
                 typename Quad::Out* y) {
  const auto* act = reinterpret_cast<const BlockQ8Act*>(x);
  const int64_t num_blocks = cols / kQuantBlock;
  thread_local std::vector<QuadAct> acts;  // [cols / 32], reused across calls
  if (static_cast<int64_t>(acts.size()) < num_blocks) acts.resize(num_blocks);
  for (int64_t b = 0; b < num_blocks; ++b) acts[b] = LoadQuadAct<kType>(act[b]);
  const int64_t quads = num_rows / 4 * 4;
  for (int64_t r = 0; r < quads; r += 4) {
    QuadPass<kType, Quad>(w + r * row_bytes, row_bytes, act, acts.data(), num_blocks, y + r);
  }
  return quads;
}

}  // namespace tpserve::internal::TPSERVE_ISA_NS

#endif
