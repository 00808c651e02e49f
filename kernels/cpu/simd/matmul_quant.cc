// Tiles for quantised weights (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1 and the K-quants Q2_K..Q6_K) times Q8
// activation blocks, one instruction-set level: integer dot products per 32-value block in 8 lanes of
// 4 values, then per block one of two reductions (the Sums policies below). Integer sums are exact,
// so every instruction path (VNNI, maddubs, scalar) gives the same lanes, and each output's
// reduction is the same sequence in any tile, which keeps the result batch invariant.
//
// A block's values are (d · scale_h) · q + offset (common/quant_block.h): the K-quants are read in
// their 32-value groups against the same 32-value activation blocks (ggml's Q8_K activations, 256
// values per scale, would round the activations more coarsely). Types whose two halves of 16 carry
// their own integer scales (Q2_K, Q3_K, Q6_K) multiply lanes 0..3 and 4..7 by them, exactly.
//
// MatMul's canonical order (every level): per output 8 f32 lanes from +0; block b (in order) does
// acc[i] = fma(f32(lane_i), d_w · d_a, acc[i]); Q2_K then acc[i] = fma(f32(min_i · Σa_i), −(dmin · d_a),
// acc[i]) with Σa_i the lane's 4 activations; the offset types (Q4_1, Q5_1, Q4_K, Q5_K) also do
// acc_min += m_w · sum_a (no fma); y = Fold8(acc) + acc_min (canonical_sum.h). AVX2 and AVX-512 run
// it in one ymm register (the AVX-512 level only swaps maddubs for VNNI, same integers; its decode tiles
// of 4 rows hold each row's 8 lanes in two 128-bit lanes, quant_row_quads.h); the portable level in 8
// scalars.
// MatMulFixedPoint's: per block f32(Σ lanes) · (d_w·2^32 · d_a), plus m_w·2^32 · sum_a (offset types)
// or f32(Σ min lanes) · (−(dmin·2^32) · d_a) (Q2_K), rounded to int64. Every Σ stays below 2^24
// (Q6_K's largest: 32 · 32 · 127 · 128), so its f32 is exact.
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <type_traits>

#include "common/dtype.h"
#include "common/quant_block.h"
#include "kernels/cpu/matmul_fixed_point.h"
#include "kernels/cpu/matmul_tile.h"
#include "kernels/cpu/quantize_activations.h"
#include "kernels/cpu/simd/canonical_sum.h"
#include "kernels/cpu/simd/fixed_point_lanes.h"

#if TPSERVE_FIXED_POINT_AVX2
#define TPSERVE_QUANT_AVX2 1
#include "kernels/cpu/simd/quant_unpack.h"
#include "kernels/cpu/simd/quant_panel.h"
#include "kernels/cpu/simd/quant_row_quads.h"
#endif

namespace tpserve::internal::TPSERVE_ISA_NS {
namespace {

#if TPSERVE_QUANT_AVX2
// The block's integer dot with one token's activations, lanes scaled by the half scales.
template <DType kType>
inline __m256i BlockLanes(const WeightBlock& wb, __m256i aq) {
  __m256i dot = IsUnsignedQuant(kType) ? DotU8S8(wb.q, aq) : DotS8S8(wb.q, aq);
  if constexpr (HasHalfScales(kType)) dot = _mm256_mullo_epi32(dot, wb.lane_scale);
  return dot;
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
// blocks, then per token AddToken with the NR integer dots (and, for Q2_K, the NR minimum lanes) and
// the activation block. Splitting an output's operations across methods changes no rounding: each
// output's own sequence is what it is.
// MatMul's: per output one f32 accumulator of 8 lanes, block after block, then a fixed tree; the
// offset types' minimum term in an f32 beside it.
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
      dmin[r] = wb[r].dmin;
    }
  }
  template <MinKind kMin>
  void AddToken(int t, const __m256i (&dot)[NR], const __m256i (&min_dot)[NR], const BlockQ8Act& a) {
    for (int r = 0; r < NR; ++r) {
      acc[r][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot[r]), _mm256_set1_ps(d[r] * a.d), acc[r][t]);
      if constexpr (kMin == MinKind::kHalves) {
        acc[r][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(min_dot[r]), _mm256_set1_ps(-(dmin[r] * a.d)), acc[r][t]);
      }
      if constexpr (kMin == MinKind::kOffset) acc_min[r][t] += m[r] * a.sum;
    }
  }
  float Result(int r, int t) const { return Fold8(acc[r][t]) + acc_min[r][t]; }

  __m256 acc[NR][NT];
  float acc_min[NR][NT];  // offset types: Σ m · (d_a Σ a)
  float d[NR], m[NR], dmin[NR];
};

// MatMulFixedPoint's: the scales carry 2^32; per block, row r's term f32(exact dot total) · f32(d·d_a)
// (+ m · Σa, or + f32(min total) · (−dmin·d_a)) is rounded into int64 lane r of a per-token vector
// (up to 4 rows side by side).
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
    neg_dmin = _mm_xor_ps(_mm_mul_ps(Gather4(wb, &WeightBlock::dmin), scale), _mm_set1_ps(-0.0f));
  }
  template <MinKind kMin>
  void AddToken(int t, const __m256i (&dot)[NR], const __m256i (&min_dot)[NR], const BlockQ8Act& a) {
    __m128 terms = _mm_mul_ps(_mm_cvtepi32_ps(Totals(dot)), _mm_mul_ps(d, _mm_set1_ps(a.d)));
    if constexpr (kMin == MinKind::kOffset) terms = _mm_add_ps(terms, _mm_mul_ps(m, _mm_set1_ps(a.sum)));
    if constexpr (kMin == MinKind::kHalves) {
      terms = _mm_add_ps(terms, _mm_mul_ps(_mm_cvtepi32_ps(Totals(min_dot)), _mm_mul_ps(neg_dmin, _mm_set1_ps(a.d))));
    }
    acc[t] = _mm256_add_epi64(acc[t], RoundToFixed4(terms));
  }
  int64_t Result(int r, int t) const {
    alignas(32) int64_t v[4];
    _mm256_store_si256(reinterpret_cast<__m256i*>(v), acc[t]);
    return v[r];
  }
  // The NR rows' lane totals in lanes 0..NR-1.
  static __m128i Totals(const __m256i (&lanes)[NR]) {
    __m256i rows[4] = {_mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256()};
    for (int r = 0; r < NR; ++r) rows[r] = lanes[r];
    return LaneTotals(rows[0], rows[1], rows[2], rows[3]);
  }

  __m256i acc[NT];  // lane r: row r's sum
  __m128 d = _mm_setzero_ps(), m = _mm_setzero_ps(), neg_dmin = _mm_setzero_ps();
};

template <DType kType, template <int, int> class Sums, int NR, int NT>
void QuantTile(const uint8_t* w, int64_t row_bytes, const uint8_t* x, int64_t x_stride, int64_t cols,
               typename Sums<NR, NT>::Out* y, int64_t y_stride) {
  constexpr MinKind kMin = MinKindOf(kType);
  Sums<NR, NT> acc;
  const int64_t num_blocks = cols / kQuantBlock;
  TilePrefetch<kBytesPer256<kType>, NR, true> prefetch(w, row_bytes);
  for (int64_t b = 0; b < num_blocks; ++b) {
    WeightBlock wb[NR];
    prefetch.At(b * kQuantBlock);
    for (int r = 0; r < NR; ++r) wb[r] = LoadBlock<kType>(w + r * row_bytes, b);
    acc.SetBlock(wb);
    for (int t = 0; t < NT; ++t) {
      const BlockQ8Act& a = reinterpret_cast<const BlockQ8Act*>(x + t * x_stride)[b];
      const __m256i aq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.qs));
      __m256i dot[NR], min_dot[NR];
      for (int r = 0; r < NR; ++r) dot[r] = BlockLanes<kType>(wb[r], aq);
      if constexpr (kMin == MinKind::kHalves) {
        const __m256i sums = DotU8S8(_mm256_set1_epi8(1), aq);  // lane i: Σ of activations 4i..4i+3
        for (int r = 0; r < NR; ++r) min_dot[r] = _mm256_mullo_epi32(sums, wb[r].lane_min);
      }
      acc.template AddToken<kMin>(t, dot, min_dot, a);
    }
  }
  for (int t = 0; t < NT; ++t)
    for (int r = 0; r < NR; ++r) y[t * y_stride + r] = acc.Result(r, t);
}

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512DQ__) && defined(__AVX512VNNI__)
#define TPSERVE_QUANT_PAIRS 1
// AVX-512, MatMul's reduction for two tokens at once: token 2p's 8 f32 lanes in lanes 0..7 of one zmm
// accumulator and token 2p + 1's in lanes 8..15. Each lane does what its FloatSums lane does, in the same
// order: the exact integer dot, its f32, one fma with the f32 product d_w · d_a (a product is rounded the
// same in a vector), and the offset term beside it (mul then add, no fma). Half the instructions per
// output of the 8-lane tiles (tpserve-bench-kernels, prefill T = 128).
inline __m512i PairOf(__m256i lo, __m256i hi) { return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1); }
inline __m256 Half8(__m512 v, int half) {
  return half == 0 ? _mm512_castps512_ps256(v) : _mm512_extractf32x8_ps(v, 1);
}

// One weight block beside both halves of a token pair.
struct PairWeight {
  __m512i q;      // the 32 values in both halves; signed types: their absolute values
  __mmask64 neg;  // signed types: the values below 0
  __m512i lane_scale, lane_min;
  __m512 d, dmin;
};

template <DType kType>
inline PairWeight ToPair(const WeightBlock& wb) {
  PairWeight pw;
  const __m512i q = PairOf(wb.q, wb.q);
  pw.q = IsUnsignedQuant(kType) ? q : _mm512_abs_epi8(q);
  pw.neg = IsUnsignedQuant(kType) ? 0 : _mm512_movepi8_mask(q);
  if constexpr (HasHalfScales(kType)) pw.lane_scale = PairOf(wb.lane_scale, wb.lane_scale);
  if constexpr (MinKindOf(kType) == MinKind::kHalves) pw.lane_min = PairOf(wb.lane_min, wb.lane_min);
  pw.d = _mm512_set1_ps(wb.d);
  pw.dmin = _mm512_set1_ps(wb.dmin);
  return pw;
}

// The pair's integer lanes: u8 × s8 as DotU8S8; signed × signed as DotS8S8's |w| · (a with w's sign)
// (where w is 0 both give 0).
template <DType kType>
inline __m512i PairLanes(const PairWeight& pw, __m512i aq) {
  const __m512i zero = _mm512_setzero_si512();
  const __m512i a = IsUnsignedQuant(kType) ? aq : _mm512_mask_sub_epi8(aq, pw.neg, zero, aq);
  __m512i dot = _mm512_dpbusd_epi32(zero, pw.q, a);
  if constexpr (HasHalfScales(kType)) dot = _mm512_mullo_epi32(dot, pw.lane_scale);
  return dot;
}

template <DType kType, int NR, int NT>
void QuantPairTile(const uint8_t* w, int64_t row_bytes, const uint8_t* x, int64_t x_stride, int64_t cols, float* y,
                   int64_t y_stride) {
  static_assert(NT % 2 == 0);
  constexpr int NP = NT / 2;
  constexpr MinKind kMin = MinKindOf(kType);
  __m512 acc[NR][NP];
  __m128 acc_min[NT];  // lane r: row r's offset sum
  for (int r = 0; r < NR; ++r)
    for (int p = 0; p < NP; ++p) acc[r][p] = _mm512_setzero_ps();
  for (int t = 0; t < NT; ++t) acc_min[t] = _mm_setzero_ps();
  const int64_t num_blocks = cols / kQuantBlock;
  TilePrefetch<kBytesPer256<kType>, NR, true> prefetch(w, row_bytes);
  for (int64_t b = 0; b < num_blocks; ++b) {
    prefetch.At(b * kQuantBlock);
    WeightBlock wb[NR];
    PairWeight pw[NR];
    for (int r = 0; r < NR; ++r) {
      wb[r] = LoadBlock<kType>(w + r * row_bytes, b);
      pw[r] = ToPair<kType>(wb[r]);
    }
    const __m128 m = Gather4(wb, &WeightBlock::m);
    for (int p = 0; p < NP; ++p) {
      const BlockQ8Act& a0 = reinterpret_cast<const BlockQ8Act*>(x + 2 * p * x_stride)[b];
      const BlockQ8Act& a1 = reinterpret_cast<const BlockQ8Act*>(x + (2 * p + 1) * x_stride)[b];
      const __m512i aq = PairOf(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a0.qs)),
                                _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a1.qs)));
      const __m512 ad = _mm512_insertf32x8(_mm512_set1_ps(a0.d), _mm256_set1_ps(a1.d), 1);
      __m512i sums = _mm512_setzero_si512();
      if constexpr (kMin == MinKind::kHalves) sums = _mm512_dpbusd_epi32(sums, _mm512_set1_epi8(1), aq);
      for (int r = 0; r < NR; ++r) {
        const __m512i dot = PairLanes<kType>(pw[r], aq);
        acc[r][p] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_mul_ps(pw[r].d, ad), acc[r][p]);
        if constexpr (kMin == MinKind::kHalves) {
          const __m512 neg_scale = _mm512_xor_ps(_mm512_mul_ps(pw[r].dmin, ad), _mm512_set1_ps(-0.0f));
          const __m512 min_lanes = _mm512_cvtepi32_ps(_mm512_mullo_epi32(sums, pw[r].lane_min));
          acc[r][p] = _mm512_fmadd_ps(min_lanes, neg_scale, acc[r][p]);
        }
      }
      if constexpr (kMin == MinKind::kOffset) {
        acc_min[2 * p] = _mm_add_ps(acc_min[2 * p], _mm_mul_ps(m, _mm_set1_ps(a0.sum)));
        acc_min[2 * p + 1] = _mm_add_ps(acc_min[2 * p + 1], _mm_mul_ps(m, _mm_set1_ps(a1.sum)));
      }
    }
  }
  for (int t = 0; t < NT; ++t) {
    alignas(16) float offset[4];
    _mm_store_ps(offset, acc_min[t]);
    for (int r = 0; r < NR; ++r) y[t * y_stride + r] = Fold8(Half8(acc[r][t / 2], t % 2)) + offset[r];
  }
}
#endif
#else
// Portable path: exact integer lanes (lane i = scale_h · Σ_{j<4} q[4i+j]·a[4i+j], as in the SIMD
// paths; Q2_K's minimum lanes min_h · Σ_{j<4} a[4i+j]).
constexpr int kLanes = 8;

inline void BlockDot(DType type, const uint8_t* row, int64_t b, const int8_t* a, int32_t lanes[kLanes],
                     int32_t min_lanes[kLanes], QuantBlock* blk) {
  DecodeQuantBlock(type, row, b, blk);
  for (int i = 0; i < kLanes; ++i) {
    int32_t dot = 0, sum = 0;
    for (int j = 4 * i; j < 4 * i + 4; ++j) {
      dot += blk->q[j] * a[j];
      sum += a[j];
    }
    lanes[i] = dot * blk->scale[i / 4];
    min_lanes[i] = sum * blk->min[i / 4];
  }
}

// MatMul's reduction, the canonical order: 8 f32 lanes per output, one fma per lane and block (two
// for Q2_K), the offset term beside them.
struct FloatSum {
  using Out = float;
  static constexpr float kScale = 1.0f;
  template <MinKind kMin>
  void AddBlock(const int32_t lanes[kLanes], float scale, float offset, const int32_t min_lanes[kLanes],
                float min_scale) {
    for (int i = 0; i < kLanes; ++i) {
      acc[i] = std::fma(static_cast<float>(lanes[i]), scale, acc[i]);
      if constexpr (kMin == MinKind::kHalves) acc[i] = std::fma(static_cast<float>(min_lanes[i]), min_scale, acc[i]);
    }
    if constexpr (kMin == MinKind::kOffset) acc_min += offset;
  }
  float Result() const { return Fold8(acc) + acc_min; }
  float acc[kLanes] = {};
  float acc_min = 0.0f;  // offset types: Σ m · (d_a Σ a)
};

// MatMulFixedPoint's reduction: the scales carry 2^32; a block's term f32(exact dot total) · scale,
// plus the offset term or Q2_K's f32(exact minimum total) · min_scale, rounds into the int64 sum.
struct FixedSum {
  using Out = int64_t;
  static constexpr float kScale = kFixedPointScale;
  template <MinKind kMin>
  void AddBlock(const int32_t lanes[kLanes], float scale, float offset, const int32_t min_lanes[kLanes],
                float min_scale) {
    int32_t total = 0, min_total = 0;
    for (int i = 0; i < kLanes; ++i) {
      total += lanes[i];
      min_total += min_lanes[i];
    }
    float term = static_cast<float>(total) * scale;
    if constexpr (kMin == MinKind::kOffset) term = term + offset;
    if constexpr (kMin == MinKind::kHalves) term = term + static_cast<float>(min_total) * min_scale;
    acc = WrapAdd(acc, ToFixed(term));
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
  constexpr MinKind kMin = MinKindOf(kType);
  for (int t = 0; t < NT; ++t) {
    const auto* act = reinterpret_cast<const BlockQ8Act*>(x + t * x_stride);
    for (int r = 0; r < NR; ++r) {
      Sum acc;
      for (int64_t b = 0; b < cols / kQuantBlock; ++b) {
        QuantBlock blk;
        int32_t lanes[kLanes], min_lanes[kLanes];
        BlockDot(kType, w + r * row_bytes, b, act[b].qs, lanes, min_lanes, &blk);
        const float offset = (blk.m * Sum::kScale) * act[b].sum;            // offset types' m · Σa
        const float min_scale = (-(blk.dmin * Sum::kScale)) * act[b].d;  // Q2_K's −dmin · d_a
        acc.template AddBlock<kMin>(lanes, (blk.d * Sum::kScale) * act[b].d, offset, min_lanes, min_scale);
      }
      y[t * y_stride + r] = acc.Result();
    }
  }
}
#endif

// The tile for NR rows × NT tokens: MatMul's for an even number of tokens on AVX-512 takes token pairs.
template <DType kType, template <int, int> class Sums, int NR, int NT>
constexpr TileFn<typename Sums<NR, NT>::Out> Tile() {
#if TPSERVE_QUANT_PAIRS
  if constexpr (std::is_same_v<Sums<NR, NT>, FloatSums<NR, NT>> && NT % 2 == 0) return QuantPairTile<kType, NR, NT>;
#endif
  return QuantTile<kType, Sums, NR, NT>;
}

template <DType kType, template <int, int> class Sums>
TileTable<typename Sums<1, 1>::Out> MakeTable() {
  using Out = typename Sums<1, 1>::Out;
#if TPSERVE_QUANT_PANELS
  constexpr PanelFn<Out> kPanel = HasPanel<Out>(kType) ? QuantPanel<kType, Out> : nullptr;
#else
  constexpr PanelFn<Out> kPanel = nullptr;
#endif
  RowsFn<Out> rows = nullptr;
#if TPSERVE_QUANT_ROW_QUADS
  if constexpr (HasQuads<Out>(kType)) {
    rows = QuadRows<kType, std::conditional_t<std::is_same_v<Out, float>, FloatQuad, FixedQuad>>;
  }
#endif
  return TileTable<Out>{{
      {Tile<kType, Sums, 1, 1>(), Tile<kType, Sums, 1, 2>(), Tile<kType, Sums, 1, 3>(), Tile<kType, Sums, 1, 4>()},
      {Tile<kType, Sums, 2, 1>(), Tile<kType, Sums, 2, 2>(), Tile<kType, Sums, 2, 3>(), Tile<kType, Sums, 2, 4>()},
      {Tile<kType, Sums, 4, 1>(), Tile<kType, Sums, 4, 2>(), Tile<kType, Sums, 4, 3>(), Tile<kType, Sums, 4, 4>()},
  }, kPanel, rows};
}

// The quantised types' tables for one reduction.
template <template <int, int> class Sums>
const TileTable<typename Sums<1, 1>::Out>& TablesFor(DType type) {
  using Table = TileTable<typename Sums<1, 1>::Out>;
  static const Table kQ8_0 = MakeTable<DType::kQ8_0, Sums>();
  static const Table kQ4_0 = MakeTable<DType::kQ4_0, Sums>();
  static const Table kQ4_1 = MakeTable<DType::kQ4_1, Sums>();
  static const Table kQ5_0 = MakeTable<DType::kQ5_0, Sums>();
  static const Table kQ5_1 = MakeTable<DType::kQ5_1, Sums>();
  static const Table kQ2_K = MakeTable<DType::kQ2_K, Sums>();
  static const Table kQ3_K = MakeTable<DType::kQ3_K, Sums>();
  static const Table kQ4_K = MakeTable<DType::kQ4_K, Sums>();
  static const Table kQ5_K = MakeTable<DType::kQ5_K, Sums>();
  static const Table kQ6_K = MakeTable<DType::kQ6_K, Sums>();
  switch (type) {
    case DType::kQ8_0: return kQ8_0;
    case DType::kQ4_0: return kQ4_0;
    case DType::kQ4_1: return kQ4_1;
    case DType::kQ5_0: return kQ5_0;
    case DType::kQ5_1: return kQ5_1;
    case DType::kQ2_K: return kQ2_K;
    case DType::kQ3_K: return kQ3_K;
    case DType::kQ4_K: return kQ4_K;
    case DType::kQ5_K: return kQ5_K;
    case DType::kQ6_K: return kQ6_K;
    default: break;
  }
  std::abort();  // unreachable: MatMul and MatMulFixedPoint check the type
  return kQ8_0;
}

}  // namespace

const TileTable<float>& QuantTiles(DType type) { return TablesFor<FloatSums>(type); }
const TileTable<int64_t>& FixedPointQuantTiles(DType type) { return TablesFor<FixedSums>(type); }

}  // namespace tpserve::internal::TPSERVE_ISA_NS
