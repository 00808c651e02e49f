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
// MatMul's canonical order (every level): per output one f32 accumulator from +0; block b (in order)
// does acc = fma(f32(T_b), d_w · d_a, acc) with T_b the block's exact integer total (the sum of its 8
// lanes); Q2_K then acc = fma(f32(M_b), −(dmin · d_a), acc) with M_b the total of its minimum lanes
// (min_h · Σa over each half); the offset types (Q4_1, Q5_1, Q4_K, Q5_K) also do acc_min += m_w · sum_a
// (no fma); y = acc + acc_min. One product rounding per block, as ggml's repacked kernels; every level
// forms T_b its own way (AVX2 and AVX-512 tiles fold 4 rows' lanes into one vector of 4 totals, the
// panels and quads hold rows in lanes), the portable level in scalars.
// MatMulFixedPoint's: per block f32(T_b) · (d_w·2^32 · d_a), plus m_w·2^32 · sum_a (offset types)
// or f32(M_b) · (−(dmin·2^32) · d_a) (Q2_K), rounded to int64. Every total stays below 2^24
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

// The NR rows' block totals (lanes 0..NR-1) and their scales, times the sums' scale (1, or the exact
// 2^32 of the fixed point).
template <int NR>
struct RowBlock {
  void Set(__m128 rows_d, __m128 rows_m, __m128 rows_dmin, float sums_scale) {
    const __m128 scale = _mm_set1_ps(sums_scale);
    d = _mm_mul_ps(rows_d, scale);
    m = _mm_mul_ps(rows_m, scale);
    neg_dmin = _mm_xor_ps(_mm_mul_ps(rows_dmin, scale), _mm_set1_ps(-0.0f));
  }
  void Set(const WeightBlock (&wb)[NR], float sums_scale) {
    Set(Gather4(wb, &WeightBlock::d), Gather4(wb, &WeightBlock::m), Gather4(wb, &WeightBlock::dmin), sums_scale);
  }
  // The NR rows' lane totals, as f32 (exact: below 2^24).
  static __m128 Totals(const __m256i (&lanes)[NR]) {
    __m256i rows[4] = {_mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256()};
    for (int r = 0; r < NR; ++r) rows[r] = lanes[r];
    return _mm_cvtepi32_ps(LaneTotals(rows[0], rows[1], rows[2], rows[3]));
  }
  __m128 d = _mm_setzero_ps(), m = _mm_setzero_ps(), neg_dmin = _mm_setzero_ps();
};

// The two reductions of NR rows × NT tokens, fed per block: SetBlock with the NR weight blocks (or
// SetRows with the rows' d and m, the decode quads'), then per token AddToken with the NR integer dots
// (and, for Q2_K, the NR minimum lanes) or AddTotals with their totals, and the activation block; each
// keeps row r of token t in lane r of a vector per token.
// MatMul's: the f32 accumulator and the offset types' minimum sum beside it.
template <int NR, int NT>
struct FloatSums {
  using Out = float;
  static constexpr float kScale = 1.0f;
  FloatSums() {
    for (int t = 0; t < NT; ++t) acc[t] = acc_min[t] = _mm_setzero_ps();
  }
  void SetBlock(const WeightBlock (&wb)[NR]) { block.Set(wb, kScale); }
  void SetRows(__m128 d, __m128 m) { block.Set(d, m, _mm_setzero_ps(), kScale); }
  template <MinKind kMin>
  void AddToken(int t, const __m256i (&dot)[NR], const __m256i (&min_dot)[NR], const BlockQ8Act& a) {
    __m128 min_totals = _mm_setzero_ps();
    if constexpr (kMin == MinKind::kHalves) min_totals = block.Totals(min_dot);
    AddTotals<kMin>(t, block.Totals(dot), min_totals, a);
  }
  template <MinKind kMin>
  void AddTotals(int t, __m128 totals, __m128 min_totals, const BlockQ8Act& a) {
    const __m128 ad = _mm_set1_ps(a.d);
    acc[t] = _mm_fmadd_ps(totals, _mm_mul_ps(block.d, ad), acc[t]);
    if constexpr (kMin == MinKind::kHalves) acc[t] = _mm_fmadd_ps(min_totals, _mm_mul_ps(block.neg_dmin, ad), acc[t]);
    if constexpr (kMin == MinKind::kOffset) acc_min[t] = _mm_add_ps(acc_min[t], _mm_mul_ps(block.m, _mm_set1_ps(a.sum)));
  }
  float Result(int r, int t) const {
    alignas(16) float v[4];
    _mm_store_ps(v, _mm_add_ps(acc[t], acc_min[t]));
    return v[r];
  }

  RowBlock<NR> block;
  __m128 acc[NT], acc_min[NT];
};

// MatMulFixedPoint's: per block, row r's term f32(T_b) · f32(d·d_a) (+ m · Σa, or + f32(M_b) · (−dmin·d_a))
// is rounded into int64 lane r of a per-token vector.
template <int NR, int NT>
struct FixedSums {
  using Out = int64_t;
  FixedSums() {
    for (int t = 0; t < NT; ++t) acc[t] = _mm256_setzero_si256();
  }
  static constexpr float kScale = kFixedPointScale;
  void SetBlock(const WeightBlock (&wb)[NR]) { block.Set(wb, kScale); }
  void SetRows(__m128 d, __m128 m) { block.Set(d, m, _mm_setzero_ps(), kScale); }
  template <MinKind kMin>
  void AddToken(int t, const __m256i (&dot)[NR], const __m256i (&min_dot)[NR], const BlockQ8Act& a) {
    __m128 min_totals = _mm_setzero_ps();
    if constexpr (kMin == MinKind::kHalves) min_totals = block.Totals(min_dot);
    AddTotals<kMin>(t, block.Totals(dot), min_totals, a);
  }
  template <MinKind kMin>
  void AddTotals(int t, __m128 totals, __m128 min_totals, const BlockQ8Act& a) {
    __m128 terms = _mm_mul_ps(totals, _mm_mul_ps(block.d, _mm_set1_ps(a.d)));
    if constexpr (kMin == MinKind::kOffset) terms = _mm_add_ps(terms, _mm_mul_ps(block.m, _mm_set1_ps(a.sum)));
    if constexpr (kMin == MinKind::kHalves) {
      terms = _mm_add_ps(terms, _mm_mul_ps(min_totals, _mm_mul_ps(block.neg_dmin, _mm_set1_ps(a.d))));
    }
    acc[t] = _mm256_add_epi64(acc[t], RoundToFixed4(terms));
  }
  int64_t Result(int r, int t) const {
    alignas(32) int64_t v[4];
    _mm256_store_si256(reinterpret_cast<__m256i*>(v), acc[t]);
    return v[r];
  }

  RowBlock<NR> block;
  __m256i acc[NT];  // lane r: row r's sum
};

template <DType kType, template <int, int> class Sums, int NR, int NT>
void QuantTile(const uint8_t* w, int64_t row_bytes, const uint8_t* x, int64_t x_stride, int64_t cols,
               typename Sums<NR, NT>::Out* y, int64_t y_stride) {
  constexpr MinKind kMin = MinKindOf(kType);
  Sums<NR, NT> acc;
  const int64_t num_blocks = cols / kQuantBlock;
  TilePrefetch<kBytesPer256<kType>, NR, true, kQuantBlock> prefetch(w, row_bytes);
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

#else
// Portable path: a block's exact integer total T_b = Σ_h scale_h · Σ_{j in half h} q[j]·a[j] (the SIMD
// paths' 8 lanes summed) and Q2_K's minimum total M_b = Σ_h min_h · Σ_{j in half h} a[j].
struct BlockTotals {
  int32_t total = 0, min_total = 0;
};

inline BlockTotals BlockDot(DType type, const uint8_t* row, int64_t b, const int8_t* a, QuantBlock* blk) {
  DecodeQuantBlock(type, row, b, blk);
  BlockTotals totals;
  for (int h = 0; h < 2; ++h) {
    int32_t dot = 0, sum = 0;
    for (int j = 16 * h; j < 16 * h + 16; ++j) {
      dot += blk->q[j] * a[j];
      sum += a[j];
    }
    totals.total += dot * blk->scale[h];
    totals.min_total += sum * blk->min[h];
  }
  return totals;
}

// MatMul's reduction, the canonical order: one fma per block (two for Q2_K), the offset term beside it.
struct FloatSum {
  using Out = float;
  static constexpr float kScale = 1.0f;
  template <MinKind kMin>
  void AddBlock(BlockTotals totals, float scale, float offset, float min_scale) {
    acc = std::fma(static_cast<float>(totals.total), scale, acc);
    if constexpr (kMin == MinKind::kHalves) acc = std::fma(static_cast<float>(totals.min_total), min_scale, acc);
    if constexpr (kMin == MinKind::kOffset) acc_min += offset;
  }
  float Result() const { return acc + acc_min; }
  float acc = 0.0f;
  float acc_min = 0.0f;  // offset types: Σ m · (d_a Σ a)
};

// MatMulFixedPoint's reduction: the scales carry 2^32; a block's term f32(T_b) · scale, plus the offset
// term or Q2_K's f32(M_b) · min_scale, rounds into the int64 sum.
struct FixedSum {
  using Out = int64_t;
  static constexpr float kScale = kFixedPointScale;
  template <MinKind kMin>
  void AddBlock(BlockTotals totals, float scale, float offset, float min_scale) {
    float term = static_cast<float>(totals.total) * scale;
    if constexpr (kMin == MinKind::kOffset) term = term + offset;
    if constexpr (kMin == MinKind::kHalves) term = term + static_cast<float>(totals.min_total) * min_scale;
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
        const BlockTotals totals = BlockDot(kType, w + r * row_bytes, b, act[b].qs, &blk);
        const float offset = (blk.m * Sum::kScale) * act[b].sum;            // offset types' m · Σa
        const float min_scale = (-(blk.dmin * Sum::kScale)) * act[b].d;  // Q2_K's −dmin · d_a
        acc.template AddBlock<kMin>(totals, (blk.d * Sum::kScale) * act[b].d, offset, min_scale);
      }
      y[t * y_stride + r] = acc.Result();
    }
  }
}
#endif

template <DType kType, template <int, int> class Sums>
TileTable<typename Sums<1, 1>::Out> MakeTable() {
  using Out = typename Sums<1, 1>::Out;
#if TPSERVE_QUANT_PANELS
  constexpr PanelFn<Out> kPanel = HasPanel<Out>(kType) ? QuantPanel<kType, Out> : nullptr;
  constexpr PanelPrepareFn kPrepare = HasPanel<Out>(kType) ? PrepareActivations<kType> : nullptr;
  constexpr int64_t kPanelFrom = kQuantPanelMinTokens;
#else
  constexpr PanelFn<Out> kPanel = nullptr;
  constexpr PanelPrepareFn kPrepare = nullptr;
  constexpr int64_t kPanelFrom = kPanelMinTokens;
#endif
  RowsFn<Out> rows = nullptr;
  int64_t rows_max_tokens = 1;
#if TPSERVE_QUANT_ROW_QUADS
  if constexpr (HasRowQuads(kType)) {
    rows = QuadRows<kType, Sums<4, 1>>;
    rows_max_tokens = kPanelFrom - 1;  // every decode batch below the panels
    static_assert(kQuantPanelMinTokens - 1 <= kQuadGroupTokens * kQuadMaxGroups);
  }
#endif
  return TileTable<Out>{{
      {QuantTile<kType, Sums, 1, 1>, QuantTile<kType, Sums, 1, 2>, QuantTile<kType, Sums, 1, 3>, QuantTile<kType, Sums, 1, 4>},
      {QuantTile<kType, Sums, 2, 1>, QuantTile<kType, Sums, 2, 2>, QuantTile<kType, Sums, 2, 3>, QuantTile<kType, Sums, 2, 4>},
      {QuantTile<kType, Sums, 4, 1>, QuantTile<kType, Sums, 4, 2>, QuantTile<kType, Sums, 4, 3>, QuantTile<kType, Sums, 4, 4>},
  }, kPanel, rows, kPanelFrom, kPanelRows, kPrepare, rows_max_tokens};
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
