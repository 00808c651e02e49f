// Internal to kernels/cpu/simd/matmul_quant.cc, the AVX2 and AVX-512 levels: one token (decode; a batch
// below the panels, QuadTokenRows) against four weight rows at once, each row in one 128-bit lane. `lo` holds
// the four rows' values 0..15, `hi` their values 16..31 (a QuadVec: one zmm on AVX-512, quad_lanes_avx512.h;
// two ymm on AVX2, rows 0-1 and 2-3, quad_lanes_avx2.h), so one dot of each against the activation's halves
// (broadcast to every lane: VNNI, or maddubs + madd on AVX2) gives every row its 8 canonical integer lanes:
// lane i of row r is int32 i of row r's lane of `lo` (i < 4) or int32 i − 4 of `hi` (i >= 4). The 8-lane
// tiles spend a vector register on each row and do the scales' f16 conversions, products and broadcasts row
// by row; here they are vector operations over four rows, about a third (AVX-512) to a half (AVX2) of the
// instructions per block (bench/README.md, "Decode over four rows" and "Four-row decode and panels on
// AVX2").
// QuadRows broadcasts the token's activation blocks (and the biased types' bias · Σa) once per call, not
// once per four rows, and leaves the last num_rows % 4 rows to the tiles (on AVX-512 one token of the types
// in HasRowStream goes through quant_row_stream_avx512.h instead, every row). Integer lanes are exact, so the
// types stored with a bias (Q4_0, Q5_0, Q6_K: w = q − bias) dot the unsigned q and subtract bias · Σa,
// the same integers as the 8-lane tiles' signed dot.
//
// Every output sees exactly the operations of matmul_quant.cc's canonical order, in the same order: the
// same exact integer block total (the 8 lanes summed, in any order: integers), the same f32 products
// d_w · d_a (a product rounds the same in any lane), the same fma per block and the same offset sum
// beside it, and for the fixed-point sums the same term per block. The ISA equality test holds each
// level to the portable one bit for bit.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "common/dtype.h"
#include "kernels/cpu/matmul_fixed_point.h"
#include "kernels/cpu/quantize_activations.h"
#include "kernels/cpu/simd/intrinsics.h"
#include "kernels/cpu/simd/quant_quad_basics.h"
#include "kernels/cpu/simd/quant_unpack.h"
#include "kernels/cpu/simd/tile_prefetch.h"

#if TPSERVE_QUANT_AVX512
#define TPSERVE_QUANT_ROW_QUADS 1
#define TPSERVE_QUANT_ROW_STREAM 1
#include "kernels/cpu/simd/kquant_row_stream.h"
#include "kernels/cpu/simd/quad_reader.h"
#include "kernels/cpu/simd/quant_row_stream_avx512.h"
#elif defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#define TPSERVE_QUANT_ROW_QUADS 1
#include "kernels/cpu/simd/kquant_row_stream.h"
#include "kernels/cpu/simd/quad_reader.h"
#endif

#if TPSERVE_QUANT_ROW_QUADS
namespace tpserve::internal::TPSERVE_ISA_NS {

// Four rows × one token against the token's prepared blocks; y: the four outputs. Sums is one of
// matmul_quant.cc's two reductions of 4 rows and 1 token (FloatSums, FixedSums), fed the rows' totals.
template <DType kType, class Sums>
void QuadPass(const uint8_t* w, int64_t row_bytes, const BlockQ8Act* act, const QuadAct* acts, int64_t num_blocks,
              typename Sums::Out* y) {
  Sums acc;
  TilePrefetch<kBytesPer256<kType>, 4, true, kQuantBlock> prefetch(w, row_bytes);
  QuadReader<kType> reader(w, row_bytes);
  for (int64_t b = 0; b < num_blocks; ++b) {
    prefetch.At(b * kQuantBlock);
    const QuadBlock q = reader.Load(b);
    const QuadAct& a = acts[b];
    acc.SetRows(q.d, q.m);
    acc.template AddTotals<MinKindOf(kType)>(
        0, _mm_cvtepi32_ps(QuadTotals<kType>(q.lo, q.hi, a, q.lo_scale, q.hi_scale)), _mm_setzero_ps(), act[b]);
  }
  for (int r = 0; r < 4; ++r) y[r] = acc.Result(r, 0);
}

// One token against four quads of rows at once (16 adjacent rows; the call's last 4-12: nq real quads, the
// others reading quad 0 again and never stored), each block's quads' lanes reduced in one transposing tree
// (TokenTotals, element 4r + t being row r of quad t) and its scales, fmas and fixed-point terms taken for the
// 16 rows in one vector. The same operations per output as FloatSums and FixedSums of 4 rows and 1 token, in
// the same order. The 32-value block types read so: QuadPass spent six operations on each quad's totals and
// four-lane operations on the rest, 45 instructions per block of four Q5_0 rows (SmolLM2 Q4_K_M's attention
// and gate/up rows), and four quads run 1.3x (Q5_0's float sums) to 1.7x (Q4_0's fixed point) as fast with
// the weights in the cache, one thread (bench/README.md, "Decode over sixteen rows"). Q8_0 reads its short rows
// so (576 columns: SmolLM2's attention, gate, up and output projection, 27 -> 14 us in the cache for 576 x 1536);
// from 1536 columns on its row stream keeps pace with memory and 16 streams did not (1536 x 576: 26 against
// 34 us), so kSixteenRowsMaxBytes sends those rows to the stream. The K-quants read whole super-blocks instead
// (kquant_row_stream.h; 16 rows of QuadReader were slower: four readers' scale state and 16 streams of
// long rows). The AVX2 level keeps QuadPass for the 32-value types (Q5_0 0.91x with 16 rows: 16 ymm registers).
#if TPSERVE_QUANT_ROW_STREAM
template <DType kType>
inline constexpr bool kSixteenRows = kType == DType::kQ4_0 || kType == DType::kQ4_1 || kType == DType::kQ5_0 ||
                                     kType == DType::kQ5_1 || kType == DType::kQ8_0;
inline constexpr int kTokenQuads = 4;
// The most bytes of 16 rows that go through the sixteen-row pass; longer rows stream.
template <DType kType>
inline constexpr int64_t kSixteenRowsMaxBytes = kType == DType::kQ8_0 ? 16384 : kLinearPrefetchBytes;

// acts: TokenAct's, with kTokenBiasShift's sums (Q8_0's 128 · Σa, against which TokenLanes reads its signed w
// as w + 128).
template <DType kType, class Out>
void QuadsPass(const uint8_t* w, int64_t row_bytes, int nq, const BlockQ8Act* act, const QuadAct* acts,
               int64_t num_blocks, Out* y) {
  constexpr bool kFixed = std::is_same_v<Out, int64_t>;
  constexpr bool kOffset = MinKindOf(kType) == MinKind::kOffset;
  const __m128 sums_scale = _mm_set1_ps(kFixed ? kFixedPointScale : 1.0f);
  GroupF acc = ZeroGroup(), acc_min = ZeroGroup();
  GroupFixed fixed;
  TilePrefetch<kBytesPer256<kType>, 4 * kTokenQuads, true, kQuantBlock> prefetch(w, row_bytes);
  auto reader = [&](int t) { return QuadReader<kType>(w + (t < nq ? 4 * t : 0) * row_bytes, row_bytes); };
  QuadReader<kType> readers[kTokenQuads] = {reader(0), reader(1), reader(2), reader(3)};
  for (int64_t b = 0; b < num_blocks; ++b) {
    prefetch.At(b * kQuantBlock);
    QuadVec lanes[kTokenQuads];
    __m128 d[kTokenQuads], m[kTokenQuads];
    for (int t = 0; t < kTokenQuads; ++t) {
      const QuadBlock q = readers[t].Load(b);
      lanes[t] = TokenLanes<kType>(q.lo, q.hi, acts[b], q.lo_scale, q.hi_scale);
      d[t] = _mm_mul_ps(q.d, sums_scale);
      m[t] = _mm_mul_ps(q.m, sums_scale);
    }
    const GroupF totals = TokenTotals(lanes);
    const GroupF scale = QuadsInGroups(d) * EveryElement(act[b].d);
    if constexpr (kFixed) {
      GroupF terms = totals * scale;
      if constexpr (kOffset) terms = terms + QuadsInGroups(m) * EveryElement(act[b].sum);
      fixed.Add(terms);
    } else {
      acc = Fma(totals, scale, acc);
      if constexpr (kOffset) acc_min = acc_min + QuadsInGroups(m) * EveryElement(act[b].sum);
    }
  }
  Out v[4 * kTokenQuads];  // element 4r + t
  if constexpr (kFixed) {
    fixed.Store(v);
  } else {
    StoreGroup(acc + acc_min, v);
  }
  for (int t = 0; t < nq; ++t) {
    for (int r = 0; r < 4; ++r) y[4 * t + r] = v[4 * r + t];
  }
}
#endif

// Decode batches below the panels: up to kQuadMaxGroups groups of kQuadGroupTokens tokens against four rows
// at once, element 4r + t of a group's vectors (GroupF, the level's) being row r against the group's token t.
// Each block's quad is read once for every token; a token's halves are broadcast from its activation block,
// its lanes reduced together with the group's three others (TokenTotals), and the group's d_a and Σa come as
// vectors prepared once per call. Per output the same operations as QuadPass (FloatSums and FixedSums of 4
// rows).
inline constexpr int kQuadGroupTokens = 4;
inline constexpr int kQuadMaxGroups = 8;

// A group's four tokens' d_a and Σa for one block, token t in element t.
struct GroupScales {
  float d[kQuadGroupTokens];
  float sum[kQuadGroupTokens];
};

// A token's activation block as QuadLanes takes it: its halves broadcast straight from the block, and the
// biased types' sums (TokenBias, prepared once per call).
inline QuadAct TokenAct(const BlockQ8Act& a, const TokenBias& bias) {
  QuadAct qa;
  qa.lo = EveryLane(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a.qs)));
  qa.hi = EveryLane(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a.qs + 16)));
  qa.lo_bias = EveryLane(bias.lo);
  qa.hi_bias = EveryLane(bias.hi);
  qa.start = EveryLane(bias.start);
  return qa;
}

// The one-token path's activation block (QuadRows): its halves and its stored bias sums (Q8_0 goes through
// the sign trick there).
template <DType kType>
inline QuadAct LoadQuadAct(const BlockQ8Act& a) {
  return TokenAct(a, TokenBiasOf<kBiasShift<kType>>(a.qs));
}

// G groups' tokens (act, bias: the 4G tokens' blocks, those past num_tokens repeating a real one) against the
// four rows at w; y: the num_tokens × 4 outputs, y_stride apart.
template <DType kType, class Out, int G>
void QuadTokensPass(const uint8_t* w, int64_t row_bytes, const BlockQ8Act* const* act, const TokenBias* const* bias,
                    const GroupScales* scales, int64_t num_blocks, int64_t num_tokens, Out* y, int64_t y_stride) {
  constexpr bool kFixed = std::is_same_v<Out, int64_t>;
  constexpr bool kOffset = MinKindOf(kType) == MinKind::kOffset;
  const GroupF sums_scale = RowsInGroups(_mm_set1_ps(kFixed ? kFixedPointScale : 1.0f));
  GroupF acc[G], acc_min[G];
  GroupFixed fixed[G];
  for (int g = 0; g < G; ++g) acc[g] = acc_min[g] = ZeroGroup();
  TilePrefetch<kBytesPer256<kType>, 4, true, kQuantBlock> prefetch(w, row_bytes);
  QuadReader<kType> reader(w, row_bytes);
  for (int64_t b = 0; b < num_blocks; ++b) {
    prefetch.At(b * kQuantBlock);
    const QuadBlock q = reader.Load(b);
    const GroupF d = RowsInGroups(q.d) * sums_scale, m = RowsInGroups(q.m) * sums_scale;
    for (int g = 0; g < G; ++g) {
      QuadVec lanes[kQuadGroupTokens];
      for (int i = 0; i < kQuadGroupTokens; ++i) {
        const int t = kQuadGroupTokens * g + i;
        if (t >= num_tokens) {  // a last group's missing tokens: any lanes, never stored
          lanes[i] = lanes[0];
          continue;
        }
        lanes[i] = TokenLanes<kType>(q.lo, q.hi, TokenAct(act[t][b], bias[t][b]), q.lo_scale, q.hi_scale);
      }
      const GroupF totals = TokenTotals(lanes);
      const GroupScales& gs = scales[g * num_blocks + b];
      const GroupF scale = d * TokensInGroups(gs.d);
      if constexpr (kFixed) {
        GroupF terms = totals * scale;
        if constexpr (kOffset) terms = terms + m * TokensInGroups(gs.sum);
        fixed[g].Add(terms);
      } else {
        acc[g] = Fma(totals, scale, acc[g]);
        if constexpr (kOffset) acc_min[g] = acc_min[g] + m * TokensInGroups(gs.sum);
      }
    }
  }
  for (int g = 0; g < G; ++g) {
    Out v[4 * kQuadGroupTokens];  // element 4r + t
    if constexpr (kFixed) {
      fixed[g].Store(v);
    } else {
      StoreGroup(acc[g] + acc_min[g], v);
    }
    for (int i = 0; i < kQuadGroupTokens && kQuadGroupTokens * g + i < num_tokens; ++i) {
      for (int r = 0; r < 4; ++r) y[(kQuadGroupTokens * g + i) * y_stride + r] = v[4 * r + i];
    }
  }
}

// 2 to kQuadGroupTokens · kQuadMaxGroups tokens: their biases and the groups' scales prepared once, then every
// whole quad of rows.
template <DType kType, class Out>
int64_t QuadTokenRows(const uint8_t* w, int64_t row_bytes, int64_t num_rows, const uint8_t* x, int64_t x_stride,
                      int64_t num_tokens, int64_t cols, Out* y, int64_t y_stride) {
  constexpr int kMaxTokens = kQuadGroupTokens * kQuadMaxGroups;
  const int64_t num_blocks = cols / kQuantBlock;
  const int groups = static_cast<int>((num_tokens + kQuadGroupTokens - 1) / kQuadGroupTokens);
  const BlockQ8Act* act[kMaxTokens];
  for (int t = 0; t < kMaxTokens; ++t) {
    act[t] = reinterpret_cast<const BlockQ8Act*>(x + std::min<int64_t>(t, num_tokens - 1) * x_stride);
  }
  thread_local std::vector<GroupScales> scales;  // [groups][cols / 32], reused across calls
  if (static_cast<int64_t>(scales.size()) < kQuadMaxGroups * num_blocks) scales.resize(kQuadMaxGroups * num_blocks);
  for (int g = 0; g < groups; ++g) {
    for (int64_t b = 0; b < num_blocks; ++b) {
      for (int i = 0; i < kQuadGroupTokens; ++i) {
        scales[g * num_blocks + b].d[i] = act[kQuadGroupTokens * g + i][b].d;
        scales[g * num_blocks + b].sum[i] = act[kQuadGroupTokens * g + i][b].sum;
      }
    }
  }
  thread_local std::vector<TokenBias> biases;  // [tokens][cols / 32]
  if (static_cast<int64_t>(biases.size()) < kMaxTokens * num_blocks) biases.resize(kMaxTokens * num_blocks);
  const TokenBias* bias[kMaxTokens];
  for (int t = 0; t < kMaxTokens; ++t) {
    bias[t] = biases.data() + std::min<int64_t>(t, num_tokens - 1) * num_blocks;
    if (t >= num_tokens) continue;
    for (int64_t b = 0; b < num_blocks; ++b) {
      biases[t * num_blocks + b] = TokenBiasOf<kTokenBiasShift<kType>>(act[t][b].qs);
    }
  }
  static constexpr decltype(&QuadTokensPass<kType, Out, 1>) kPasses[kQuadMaxGroups] = {
      QuadTokensPass<kType, Out, 1>, QuadTokensPass<kType, Out, 2>, QuadTokensPass<kType, Out, 3>,
      QuadTokensPass<kType, Out, 4>, QuadTokensPass<kType, Out, 5>, QuadTokensPass<kType, Out, 6>,
      QuadTokensPass<kType, Out, 7>, QuadTokensPass<kType, Out, 8>};
  const int64_t quads = num_rows / 4 * 4;
  for (int64_t r = 0; r < quads; r += 4) {
    kPasses[groups - 1](w + r * row_bytes, row_bytes, act, bias, scales.data(), num_blocks, num_tokens, y + r,
                        y_stride);
  }
  return quads;
}

// RowsFn (matmul_tile.h). The K-quants against one or two tokens go through their super-block path
// (kquant_row_stream.h), every row. One token: on AVX-512 the types and reductions of HasRowStream through the
// row stream (quant_row_stream_avx512.h), every row, except the sixteen-row types' short rows; the others get
// their blocks broadcast (and their biased sums) once, then every whole quad of rows, four quads at a time for
// the sixteen-row types. From the level's kQuadMinTokens: QuadTokenRows. The last num_rows % 4 rows of the quads
// are left to the tiles.
template <DType kType, class Sums>
int64_t QuadRows(const uint8_t* w, int64_t row_bytes, int64_t num_rows, const uint8_t* x, int64_t x_stride,
                 int64_t num_tokens, int64_t cols, typename Sums::Out* y, int64_t y_stride) {
  const int64_t num_blocks = cols / kQuantBlock;
  if constexpr (kKQuantStream<kType>) {
    if (num_tokens <= kKQuantStreamMaxTokens) {
      return KQuantRowStream<kType, typename Sums::Out>(w, row_bytes, num_rows, x, x_stride, num_tokens, num_blocks, y,
                                                        y_stride);
    }
  }
  if (num_tokens > 1) {
    if (num_tokens < kQuadMinTokens) return 0;  // all to the tiles
    return QuadTokenRows<kType, typename Sums::Out>(w, row_bytes, num_rows, x, x_stride, num_tokens, cols, y, y_stride);
  }
  const auto* act = reinterpret_cast<const BlockQ8Act*>(x);
#if TPSERVE_QUANT_ROW_STREAM
  if constexpr (HasRowStream<kType, typename Sums::Out>()) {
    // The sixteen-row types stream only rows too long for the quads' prefetch to run ahead in address order
    // (the 1B model's 8192 columns: 421 against 329 us; 576 and 1536 columns 1.1-1.7x faster through the quads).
    if (!kSixteenRows<kType> || 4 * kTokenQuads * row_bytes > kSixteenRowsMaxBytes<kType>) {
      return QuantRowStream<kType, typename Sums::Out>(w, row_bytes, num_rows, act, num_blocks, y);
    }
  }
#endif
  thread_local std::vector<QuadAct> acts;  // [cols / 32], reused across calls
  if (static_cast<int64_t>(acts.size()) < num_blocks) acts.resize(num_blocks);
  const int64_t quads = num_rows / 4 * 4;
#if TPSERVE_QUANT_ROW_STREAM
  if constexpr (kSixteenRows<kType>) {
    for (int64_t b = 0; b < num_blocks; ++b) {
      acts[b] = TokenAct(act[b], TokenBiasOf<kTokenBiasShift<kType>>(act[b].qs));
    }
    for (int64_t r = 0; r < quads; r += 4 * kTokenQuads) {
      const int nq = static_cast<int>(std::min<int64_t>(kTokenQuads, (quads - r) / 4));
      QuadsPass<kType, typename Sums::Out>(w + r * row_bytes, row_bytes, nq, act, acts.data(), num_blocks, y + r);
    }
    return quads;
  }
#endif
  for (int64_t b = 0; b < num_blocks; ++b) acts[b] = LoadQuadAct<kType>(act[b]);
  for (int64_t r = 0; r < quads; r += 4) {
    QuadPass<kType, Sums>(w + r * row_bytes, row_bytes, act, acts.data(), num_blocks, y + r);
  }
  return quads;
}

}  // namespace tpserve::internal::TPSERVE_ISA_NS
#endif
