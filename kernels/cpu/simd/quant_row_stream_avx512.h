// Internal to quant_row_quads.h, the AVX-512 level: one token (decode) against the rows of the 32-value block
// types one row at a time, the row's blocks 4j..4j+3 in a quad's four 128-bit lanes. QuadReader reads them
// with the block as its stride, so a thread reads its rows in address order, one memory stream, where the row
// quads read four rows' streams at once (the AVX2 level keeps the quads: its QuadAct holds one activation
// block for every lane).
//
// The canonical order is kept: the four lanes' block totals and d_w · d_a are vectors (a product rounds the
// same in any lane), then MatMul's fma per block runs along the row in block order, a scalar chain, with the
// offset sum beside it; MatMulFixedPoint's int64 terms add in any order. The ISA equality test holds this to
// the portable level bit for bit.
//
// One thread, weights in 2 MiB pages cycled from memory, us per call, quads -> this (MatMul, MatMulFixedPoint):
// - Q8_0 2048 x 8192 (the 1B model's attention, gate and up rows): 1967-2047 -> 1281-1333, 1522-1654 ->
//   1241-1319 (62 % -> 95 % of the one-core triad); 1536 x 576: 74-82 -> 61-69, 75-80 -> 61-65; 576 x 1536
//   and 8192 x 2048 unchanged within the noise. The 1B model's decode at one thread 6.0-6.1 -> 7.1-7.4 tok/s,
//   at two 10.8-10.9 -> 12.4-12.6; SmolLM2 Q8_0 unchanged.
// - The fixed point of the 4- and 5-bit types at 2048 x 8192: Q4_0 1085 -> 742, Q4_1 1032-1192 -> 858-890,
//   Q5_0 1381 -> 995, Q5_1 1540-1602 -> 1106-1157; within the noise at 576 columns.
// - Their MatMul goes slower this way (Q4_1 576 x 1536: 41-45 -> 50-57; 8192 x 2048: 938-1002 -> 1038-1106):
//   a block of them is 18-24 bytes, and the chain's 4 cycles per block come near memory's time for it. They
//   keep the quads there (HasRowStream).
#pragma once

#include <cmath>
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
#include "kernels/cpu/simd/quad_reader.h"
#include "kernels/cpu/simd/tile_prefetch.h"

namespace tpserve::internal::TPSERVE_ISA_NS {

// The types and reductions that decode through the stream.
template <DType kType, class Out>
constexpr bool HasRowStream() {
  if (std::is_same_v<Out, float>) return kType == DType::kQ8_0;
  return kType == DType::kQ8_0 || kType == DType::kQ4_0 || kType == DType::kQ4_1 || kType == DType::kQ5_0 ||
         kType == DType::kQ5_1;
}

// The token's four blocks 4j..4j+3: their halves and (biased types) bias sums in lanes 0..3 of a QuadAct,
// their d_a and Σa; zero past the row's last block.
struct StreamAct {
  QuadAct act;
  alignas(16) float d[4];
  alignas(16) float sum[4];
};

template <DType kType>
void PrepareStreamActs(const BlockQ8Act* act, int64_t num_blocks, StreamAct* out) {
  for (int64_t j = 0; j < (num_blocks + 3) / 4; ++j) {
    alignas(64) int8_t lo[64] = {}, hi[64] = {};
    alignas(64) __m128i lo_bias[4] = {}, hi_bias[4] = {};
    StreamAct& s = out[j];
    for (int k = 0; k < 4; ++k) {
      const int64_t b = 4 * j + k;
      if (b >= num_blocks) {
        s.d[k] = s.sum[k] = 0.0f;
        continue;
      }
      s.d[k] = act[b].d;
      s.sum[k] = act[b].sum;
      std::memcpy(lo + 16 * k, act[b].qs, 16);
      std::memcpy(hi + 16 * k, act[b].qs + 16, 16);
      const TokenBias bias = TokenBiasOf<kBiasShift<kType>>(act[b].qs);
      lo_bias[k] = bias.lo;
      hi_bias[k] = bias.hi;
    }
    s.act.lo = _mm512_load_si512(lo);
    s.act.hi = _mm512_load_si512(hi);
    s.act.lo_bias = _mm512_load_si512(lo_bias);
    s.act.hi_bias = _mm512_load_si512(hi_bias);
  }
}

// One row's sum, fed four blocks at a time (n of them real: fewer at the row's end).
template <DType kType, class Out>
struct StreamSum {
  static constexpr bool kFixed = std::is_same_v<Out, int64_t>;
  static constexpr bool kOffset = MinKindOf(kType) == MinKind::kOffset;

  [[gnu::always_inline]] void Add(const QuadBlock& q, const StreamAct& s, int n) {
    const QuadVec none = ZeroQuad();
    const __m128 totals = _mm_cvtepi32_ps(QuadTotals<kType>(q.lo, q.hi, s.act, none, none));
    const __m128 sums_scale = _mm_set1_ps(kFixed ? kFixedPointScale : 1.0f);
    const __m128 scale = _mm_mul_ps(_mm_mul_ps(q.d, sums_scale), _mm_load_ps(s.d));
    const __m128 offset = _mm_mul_ps(_mm_mul_ps(q.m, sums_scale), _mm_load_ps(s.sum));
    if constexpr (kFixed) {
      __m128 terms = _mm_mul_ps(totals, scale);
      if constexpr (kOffset) terms = _mm_add_ps(terms, offset);
      // Lanes past the row (n < 4) hold whatever bytes follow it against zero activations: zero terms,
      // unless those bytes' d or m is infinite (∞ · 0 is NaN), so they are zeroed whatever they hold.
      terms = _mm_maskz_mov_ps(static_cast<__mmask8>((1 << n) - 1), terms);
      fixed = _mm256_add_epi64(fixed, RoundToFixed4(terms));
    } else {
      // The chain, in block order, on the stored lanes.
      alignas(16) float t[4], c[4], o[4];
      _mm_store_ps(t, totals);
      _mm_store_ps(c, scale);
      _mm_store_ps(o, offset);
      for (int k = 0; k < n; ++k) {
        acc = std::fma(t[k], c[k], acc);
        if constexpr (kOffset) acc_min = acc_min + o[k];
      }
    }
  }

  Out Result() const {
    if constexpr (kFixed) {
      alignas(32) uint64_t v[4];
      _mm256_store_si256(reinterpret_cast<__m256i*>(v), fixed);
      return static_cast<int64_t>(v[0] + v[1] + v[2] + v[3]);  // wraps as the int64 sums do
    } else {
      return acc + acc_min;
    }
  }

  float acc = 0.0f, acc_min = 0.0f;
  __m256i fixed = _mm256_setzero_si256();
};

// RowsFn's work for one token: every row, in the stream's order. x: the token's activation blocks.
template <DType kType, class Out>
int64_t QuantRowStream(const uint8_t* w, int64_t row_bytes, int64_t num_rows, const BlockQ8Act* act,
                       int64_t num_blocks, Out* y) {
  constexpr int64_t kBlock = sizeof(BlockOf<kType>);
  const int64_t whole = num_blocks / 4, tail = num_blocks % 4;
  thread_local std::vector<StreamAct> acts;  // [ceil(cols / 128)], reused across calls
  if (static_cast<int64_t>(acts.size()) < whole + 1) acts.resize(whole + 1);
  PrepareStreamActs<kType>(act, num_blocks, acts.data());
  for (int64_t r = 0; r < num_rows; ++r) {
    const uint8_t* row = w + r * row_bytes;
    StreamSum<kType, Out> sum;
    for (int64_t j = 0; j < whole; ++j) {
      PrefetchStreamAhead(row + 4 * j * kBlock, 4 * kBlock);  // these four blocks' bytes, kPrefetchAheadBytes on
      sum.Add(QuadReader<kType>(row + 4 * j * kBlock, kBlock).Load(0), acts[j], 4);
    }
    if (tail > 0) {
      // The row's last blocks and whatever follows them (the next row's, or the rest of a column slice's
      // row), against zero activations: MatMul's chain stops at the row's last block, and the fixed point
      // zeroes the other lanes' terms. The call's last row reads a copy, which ends with the row.
      const uint8_t* rest = row + 4 * whole * kBlock;
      alignas(16) uint8_t last[4 * kBlock];
      if (r + 1 == num_rows) rest = static_cast<const uint8_t*>(std::memcpy(last, rest, tail * kBlock));
      sum.Add(QuadReader<kType>(rest, kBlock).Load(0), acts[whole], static_cast<int>(tail));
    }
    y[r] = sum.Result();
  }
  return num_rows;
}

}  // namespace tpserve::internal::TPSERVE_ISA_NS
