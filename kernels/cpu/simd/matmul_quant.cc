// Tiles for quantised weights (Q8_0, Q4_0, Q4_1) times Q8 activation blocks, one instruction-set
// level: integer dot products per 32-element block in 8 lanes of 4 elements, then per block one of
// two reductions (the Sums policies below). Integer sums are exact, so every instruction path
// (VNNI, maddubs, scalar) gives the same lanes, and each output's reduction is the same sequence in
// any tile, which keeps the result batch invariant.
//
// MatMul's canonical order (every level): per output 8 f32 lanes from +0; block b (in order) does
// acc[i] = fma(f32(lane_i), d_w · d_a, acc[i]); Q4_1 also does acc_min += m_w · sum_a (no fma);
// y = Fold8(acc) + acc_min (canonical_sum.h). AVX2 and AVX-512 run it in one ymm register (the
// AVX-512 level only swaps maddubs for VNNI, same integers); the portable level in 8 scalars.
// MatMulFixedPoint's: per block f32(Σ lanes) · (d_w·2^32 · d_a) (+ m_w·2^32 · sum_a) rounded to int64.
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "common/dtype.h"
#include "kernels/cpu/matmul_fixed_point.h"
#include "kernels/cpu/matmul_tile.h"
#include "kernels/cpu/quantize_activations.h"
#include "kernels/cpu/simd/canonical_sum.h"
#include "kernels/cpu/simd/fixed_point_lanes.h"

#if TPSERVE_FIXED_POINT_AVX2
#define TPSERVE_QUANT_AVX2 1
#include "kernels/cpu/simd/intrinsics.h"
#endif

namespace tpserve::internal::TPSERVE_ISA_NS {
namespace {

inline float Half(uint16_t h) {
#if TPSERVE_QUANT_AVX2
  return _cvtsh_ss(h);
#else
  return Fp16ToF32(h);
#endif
}

#if TPSERVE_QUANT_AVX2
// Eight int32 lanes, lane i = Σ_{j<4} u[4i+j] * s[4i+j] for unsigned u and signed s bytes.
inline __m256i DotU8S8(__m256i u, __m256i s) {
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
  return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s);
#else
  return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
#endif
}
// Signed × signed through the sign trick: |w| · (a with w's sign).
inline __m256i DotS8S8(__m256i w, __m256i a) { return DotU8S8(_mm256_sign_epi8(w, w), _mm256_sign_epi8(a, w)); }

// 16 packed bytes → 32 nibbles in element order (low nibbles are elements 0..15).
inline __m256i UnpackNibbles(const uint8_t* qs) {
  const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m128i m = _mm_set1_epi8(0x0f);
  return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(b, 4), m), _mm_and_si128(b, m));
}

// One weight block, unpacked for the dot with any number of tokens.
struct WeightBlock {
  __m256i q;   // Q8_0, Q4_0: signed values; Q4_1: unsigned nibbles
  float d;
  float m;     // Q4_1 only
};

template <DType kType>
inline WeightBlock LoadBlock(const uint8_t* row, int64_t b) {
  WeightBlock wb{};
  if constexpr (kType == DType::kQ8_0) {
    const auto* blk = reinterpret_cast<const BlockQ8_0*>(row) + b;
    wb.q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk->qs));
    wb.d = Half(blk->d);
  } else if constexpr (kType == DType::kQ4_0) {
    const auto* blk = reinterpret_cast<const BlockQ4_0*>(row) + b;
    wb.q = _mm256_sub_epi8(UnpackNibbles(blk->qs), _mm256_set1_epi8(8));
    wb.d = Half(blk->d);
  } else {
    const auto* blk = reinterpret_cast<const BlockQ4_1*>(row) + b;
    wb.q = UnpackNibbles(blk->qs);
    wb.d = Half(blk->d);
    wb.m = Half(blk->m);
  }
  return wb;
}

// Four vectors of 8 int32 lanes → their four lane totals, exact: [Σa, Σb, Σc, Σd].
inline __m128i LaneTotals(__m256i a, __m256i b, __m256i c, __m256i d) {
  const __m256i ab = _mm256_hadd_epi32(a, b);      // [a01 a23 b01 b23 | a45 a67 b45 b67]
  const __m256i cd = _mm256_hadd_epi32(c, d);
  const __m256i abcd = _mm256_hadd_epi32(ab, cd);  // [a0-3 b0-3 c0-3 d0-3 | a4-7 b4-7 c4-7 d4-7]
  return _mm_add_epi32(_mm256_castsi256_si128(abcd), _mm256_extracti128_si256(abcd, 1));
}

// The NR blocks' `field` (d or m) in the low lanes of a vector, zero-padded.
template <int NR>
inline __m128 Gather4(const WeightBlock (&wb)[NR], float WeightBlock::*field) {
  if constexpr (NR == 1) {
    return _mm_set_ss(wb[0].*field);
  } else if constexpr (NR == 2) {
    return _mm_setr_ps(wb[0].*field, wb[1].*field, 0.0f, 0.0f);
  } else {
    return _mm_setr_ps(wb[0].*field, wb[1].*field, wb[2].*field, wb[3].*field);
  }
}

// The two reductions of a tile's NR × NT outputs, fed per block: SetBlock with the NR weight
// blocks, then per token AddToken with the NR integer dots and the activation block (kMin: Q4_1's
// minimum term too). Splitting an output's operations across methods changes no rounding: each
// output's own sequence is what it is.
// MatMul's: per output one f32 accumulator of 8 lanes, block after block, then a fixed tree;
// Q4_1's minimum term in an f32 beside it.
template <int NR, int NT>
struct FloatSums {
  using Out = float;
  FloatSums() {
    for (int r = 0; r < NR; ++r)
      for (int t = 0; t < NT; ++t) {
        acc[r][t] = _mm256_setzero_ps();
        acc_min[r][t] = 0.0f;
      }
  }
  void SetBlock(const WeightBlock (&wb)[NR]) {
    for (int r = 0; r < NR; ++r) {
      d[r] = wb[r].d;
      m[r] = wb[r].m;
    }
  }
  template <bool kMin>
  void AddToken(int t, const __m256i (&dot)[NR], const BlockQ8Act& a) {
    for (int r = 0; r < NR; ++r) {
      acc[r][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot[r]), _mm256_set1_ps(d[r] * a.d), acc[r][t]);
      if constexpr (kMin) acc_min[r][t] += m[r] * a.sum;
    }
  }
  float Result(int r, int t) const { return Fold8(acc[r][t]) + acc_min[r][t]; }

  __m256 acc[NR][NT];
  float acc_min[NR][NT];  // Q4_1: Σ m · (d_a Σ a)
  float d[NR], m[NR];
};

// MatMulFixedPoint's: the scales carry 2^32; per block, row r's term f32(exact dot total) · f32(d·d_a)
// (+ m · Σa for Q4_1) is rounded into int64 lane r of a per-token vector (up to 4 rows side by side).
template <int NR, int NT>
struct FixedSums {
  using Out = int64_t;
  FixedSums() {
    for (int t = 0; t < NT; ++t) acc[t] = _mm256_setzero_si256();
  }
  void SetBlock(const WeightBlock (&wb)[NR]) {
    const __m128 scale = _mm_set1_ps(kFixedPointScale);  // exact: a power of two
    d = _mm_mul_ps(Gather4(wb, &WeightBlock::d), scale);
    m = _mm_mul_ps(Gather4(wb, &WeightBlock::m), scale);
  }
  template <bool kMin>
  void AddToken(int t, const __m256i (&dot)[NR], const BlockQ8Act& a) {
    __m256i rows[4] = {_mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256()};
    for (int r = 0; r < NR; ++r) rows[r] = dot[r];
    const __m128i totals = LaneTotals(rows[0], rows[1], rows[2], rows[3]);
    __m128 terms = _mm_mul_ps(_mm_cvtepi32_ps(totals), _mm_mul_ps(d, _mm_set1_ps(a.d)));
    if constexpr (kMin) terms = _mm_add_ps(terms, _mm_mul_ps(m, _mm_set1_ps(a.sum)));
    acc[t] = _mm256_add_epi64(acc[t], RoundToFixed4(terms));
  }
  int64_t Result(int r, int t) const {
    alignas(32) int64_t v[4];
    _mm256_store_si256(reinterpret_cast<__m256i*>(v), acc[t]);
    return v[r];
  }

  __m256i acc[NT];  // lane r: row r's sum
  __m128 d = _mm_setzero_ps(), m = _mm_setzero_ps();
};

template <DType kType, template <int, int> class Sums, int NR, int NT>
void QuantTile(const uint8_t* w, int64_t row_bytes, const uint8_t* x, int64_t x_stride, int64_t cols,
               typename Sums<NR, NT>::Out* y, int64_t y_stride) {
  Sums<NR, NT> acc;
  const int64_t num_blocks = cols / kQuantBlock;
  for (int64_t b = 0; b < num_blocks; ++b) {
    WeightBlock wb[NR];
    for (int r = 0; r < NR; ++r) wb[r] = LoadBlock<kType>(w + r * row_bytes, b);
    acc.SetBlock(wb);
    for (int t = 0; t < NT; ++t) {
      const BlockQ8Act& a = reinterpret_cast<const BlockQ8Act*>(x + t * x_stride)[b];
      const __m256i aq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.qs));
      __m256i dot[NR];
      for (int r = 0; r < NR; ++r) dot[r] = kType == DType::kQ4_1 ? DotU8S8(wb[r].q, aq) : DotS8S8(wb[r].q, aq);
      acc.template AddToken<kType == DType::kQ4_1>(t, dot, a);
    }
  }
  for (int t = 0; t < NT; ++t)
    for (int r = 0; r < NR; ++r) y[t * y_stride + r] = acc.Result(r, t);
}
#else
// Portable path: exact integer lanes (lane i = Σ_{j<4} w[4i+j]·a[4i+j], as in the SIMD paths).
constexpr int kLanes = 8;

template <DType kType>
inline void BlockDot(const uint8_t* row, int64_t b, const int8_t* a, int32_t lanes[kLanes], float* d, float* m) {
  int32_t w[kQuantBlock];
  if constexpr (kType == DType::kQ8_0) {
    const auto* blk = reinterpret_cast<const BlockQ8_0*>(row) + b;
    for (int j = 0; j < kQuantBlock; ++j) w[j] = blk->qs[j];
    *d = Half(blk->d);
  } else {
    const uint8_t* qs;
    int offset = 0;
    if constexpr (kType == DType::kQ4_0) {
      const auto* blk = reinterpret_cast<const BlockQ4_0*>(row) + b;
      qs = blk->qs;
      offset = 8;
      *d = Half(blk->d);
    } else {
      const auto* blk = reinterpret_cast<const BlockQ4_1*>(row) + b;
      qs = blk->qs;
      *d = Half(blk->d);
      *m = Half(blk->m);
    }
    for (int j = 0; j < kQuantBlock / 2; ++j) {
      w[j] = (qs[j] & 0xf) - offset;
      w[j + 16] = (qs[j] >> 4) - offset;
    }
  }
  for (int i = 0; i < kLanes; ++i) {
    lanes[i] = 0;
    for (int j = 4 * i; j < 4 * i + 4; ++j) lanes[i] += w[j] * a[j];
  }
}

// MatMul's reduction, the canonical order: 8 f32 lanes per output, one fma per lane and block.
struct FloatSum {
  using Out = float;
  static constexpr float kScale = 1.0f;
  void AddBlock(const int32_t lanes[kLanes], float scale, float min) {
    for (int i = 0; i < kLanes; ++i) acc[i] = std::fma(static_cast<float>(lanes[i]), scale, acc[i]);
    acc_min += min;
  }
  float Result() const { return Fold8(acc) + acc_min; }
  float acc[kLanes] = {};
  float acc_min = 0.0f;  // Q4_1: Σ m · (d_a Σ a)
};

// MatMulFixedPoint's reduction: the scales carry 2^32; a block's term f32(exact dot total) · scale,
// plus Q4_1's minimum term, rounds into the int64 sum.
struct FixedSum {
  using Out = int64_t;
  static constexpr float kScale = kFixedPointScale;
  void AddBlock(const int32_t lanes[kLanes], float scale, float min) {
    int32_t total = 0;
    for (int i = 0; i < kLanes; ++i) total += lanes[i];
    acc = WrapAdd(acc, ToFixed(static_cast<float>(total) * scale + min));
  }
  int64_t Result() const { return acc; }
  int64_t acc = 0;
};

// One accumulator per output: the tile shape does not matter.
template <int, int>
using FloatSums = FloatSum;
template <int, int>
using FixedSums = FixedSum;

template <DType kType, template <int, int> class Sums, int NR, int NT>
void QuantTile(const uint8_t* w, int64_t row_bytes, const uint8_t* x, int64_t x_stride, int64_t cols,
               typename Sums<NR, NT>::Out* y, int64_t y_stride) {
  using Sum = Sums<NR, NT>;
  for (int t = 0; t < NT; ++t) {
    const auto* act = reinterpret_cast<const BlockQ8Act*>(x + t * x_stride);
    for (int r = 0; r < NR; ++r) {
      Sum acc;
      for (int64_t b = 0; b < cols / kQuantBlock; ++b) {
        float d = 0.0f, m = 0.0f;
        int32_t lanes[kLanes];
        BlockDot<kType>(w + r * row_bytes, b, act[b].qs, lanes, &d, &m);
        const float min = kType == DType::kQ4_1 ? (m * Sum::kScale) * act[b].sum : 0.0f;  // Q4_1's m · Σa
        acc.AddBlock(lanes, (d * Sum::kScale) * act[b].d, min);
      }
      y[t * y_stride + r] = acc.Result();
    }
  }
}
#endif

template <DType kType, template <int, int> class Sums>
TileTable<typename Sums<1, 1>::Out> MakeTable() {
  return TileTable<typename Sums<1, 1>::Out>{{
      {QuantTile<kType, Sums, 1, 1>, QuantTile<kType, Sums, 1, 2>, QuantTile<kType, Sums, 1, 3>,
       QuantTile<kType, Sums, 1, 4>},
      {QuantTile<kType, Sums, 2, 1>, QuantTile<kType, Sums, 2, 2>, QuantTile<kType, Sums, 2, 3>,
       QuantTile<kType, Sums, 2, 4>},
      {QuantTile<kType, Sums, 4, 1>, QuantTile<kType, Sums, 4, 2>, QuantTile<kType, Sums, 4, 3>,
       QuantTile<kType, Sums, 4, 4>},
  }};
}

// The three quantised types' tables for one reduction.
template <template <int, int> class Sums>
const TileTable<typename Sums<1, 1>::Out>& TablesFor(DType type) {
  using Table = TileTable<typename Sums<1, 1>::Out>;
  static const Table kQ8_0 = MakeTable<DType::kQ8_0, Sums>();
  static const Table kQ4_0 = MakeTable<DType::kQ4_0, Sums>();
  static const Table kQ4_1 = MakeTable<DType::kQ4_1, Sums>();
  switch (type) {
    case DType::kQ8_0: return kQ8_0;
    case DType::kQ4_0: return kQ4_0;
    case DType::kQ4_1: return kQ4_1;
    default: break;
  }
  std::abort();  // unreachable: MatMul and MatMulFixedPoint check the type
  return kQ8_0;
}

}  // namespace

const TileTable<float>& QuantTiles(DType type) { return TablesFor<FloatSums>(type); }
const TileTable<int64_t>& FixedPointQuantTiles(DType type) { return TablesFor<FixedSums>(type); }

}  // namespace tpserve::internal::TPSERVE_ISA_NS
