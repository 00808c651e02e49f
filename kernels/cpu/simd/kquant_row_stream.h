// Internal to quant_row_quads.h, the AVX2 and AVX-512 levels: one token (decode) against the rows of Q4_K, Q5_K
// and Q6_K a whole 256-value super-block per step. The row quads (QuadReader) spend a step on each 32-value group
// of four rows: two 128-bit gathers, the group's scales decoded every eighth step and kept in memory, four-lane
// products. Here each step takes a row's super-block in full loads, and its level's GroupTermsOf
// (kquant_terms_avx512.h: VNNI over the groups in the halves of four vectors; kquant_terms_avx2.h: maddubs over
// eight) gives its eight groups' exact totals and their scales and products in one vector each.
// - MatMulFixedPoint's sums (the row-parallel layers: attention output, FFN down) read one row at a time, in
//   address order, one stream, as quant_row_stream_avx512.h reads the 32-value types: per group the exact
//   integer total, the f32 products (d · scale) · 2^32 · d_a and (−dmin · min) · 2^32 · Σa (Q6_K: d · 2^32 ·
//   d_a), the term rounded to nearest even; int64 terms add in any order.
// - MatMul's float sums chain an fma per group in group order, a chain along the row: four rows at a time,
//   their terms transposed into lanes (KQuantQuadFloat), so that the four chains run side by side.
// One thread, us per call, quads -> this, 1536 x 576 in the cache (bench/README.md, "K-quants by the super-block"):
// - AVX-512: fixed point Q4_K 29.4-29.9 -> 13.9-14.3, Q6_K 35.9-36.9 -> 14.6-15.2; float Q4_K 27.1 -> 15.5-15.7,
//   Q6_K 33.4 -> 16.0-16.1.
// - AVX2: fixed point Q4_K 61.2 -> 37.2, Q5_K 70.7 -> 43.8, Q6_K 83.1 -> 41.5; float Q4_K 50.3-52.3 -> 38.9-39.8,
//   Q6_K 77.8-87.5 -> 36.0-44.3; 2048 x 8192 from memory 1.5-1.8x.
// The ISA equality test holds both levels to the portable one bit for bit.
#pragma once

#include <cstdint>
#include <type_traits>
#include <vector>

#include "common/dtype.h"
#include "kernels/cpu/matmul_fixed_point.h"
#include "kernels/cpu/quantize_activations.h"
#include "kernels/cpu/simd/intrinsics.h"
#include "kernels/cpu/simd/kquant_super_block.h"
#include "kernels/cpu/simd/tile_prefetch.h"

#if TPSERVE_QUANT_AVX512
#include "kernels/cpu/simd/kquant_terms_avx512.h"
#else
#include "kernels/cpu/simd/kquant_terms_avx2.h"
#endif

namespace tpserve::internal::TPSERVE_ISA_NS {

// The element of the level's totals order that holds group s.
template <DType kType>
constexpr int TotalsElement(int s) {
  for (int i = 0; i < 8; ++i) {
    if (TotalsGroup<kType>(i) == s) return i;
  }
  return -1;
}

// One row's fixed-point sum over its super-blocks.
template <DType kType>
int64_t KQuantRowSum(const uint8_t* row, const KStreamAct* acts, int64_t supers) {
  KFixedSum fixed;
  for (int64_t j = 0; j < supers; ++j) {
    const uint8_t* blk = row + j * static_cast<int64_t>(sizeof(KBlockOf<kType>));
    PrefetchStreamAhead(blk, sizeof(KBlockOf<kType>));
    const KGroupTerms g = GroupTermsOf<kType>(blk, acts[j], kFixedPointScale);
    __m256 terms = _mm256_mul_ps(g.totals, g.scale);
    if constexpr (kType != DType::kQ6_K) terms = _mm256_add_ps(terms, g.offset);
    fixed.Add(terms);
  }
  return fixed.Total();
}

// Four rows' float sums (MatMul's), row r in lane r: per group in order, acc = fma(total, scale, acc) and
// (Q4_K, Q5_K) acc_min += offset, as FloatSums of four rows; a super-block's four rows' terms are transposed
// into group vectors first (element i of row r's vectors to lane r of vector i).
template <DType kType>
void KQuantQuadFloat(const uint8_t* w, int64_t row_bytes, const KStreamAct* acts, int64_t supers, float* y) {
  __m128 acc = _mm_setzero_ps(), acc_min = _mm_setzero_ps();
  TilePrefetch<sizeof(KBlockOf<kType>), 4, true> prefetch(w, row_bytes);
  // Element i of four rows' vectors (row r in v[r]) as lane r of out[i].
  const auto transpose = [](const __m256 (&v)[4], __m128 (&out)[8]) {
    const __m256 lo01 = _mm256_unpacklo_ps(v[0], v[1]), hi01 = _mm256_unpackhi_ps(v[0], v[1]);
    const __m256 lo23 = _mm256_unpacklo_ps(v[2], v[3]), hi23 = _mm256_unpackhi_ps(v[2], v[3]);
    const __m256 e0 = _mm256_shuffle_ps(lo01, lo23, _MM_SHUFFLE(1, 0, 1, 0));  // elements 0 and 4
    const __m256 e1 = _mm256_shuffle_ps(lo01, lo23, _MM_SHUFFLE(3, 2, 3, 2));  // 1 and 5
    const __m256 e2 = _mm256_shuffle_ps(hi01, hi23, _MM_SHUFFLE(1, 0, 1, 0));  // 2 and 6
    const __m256 e3 = _mm256_shuffle_ps(hi01, hi23, _MM_SHUFFLE(3, 2, 3, 2));  // 3 and 7
    const __m256 e[4] = {e0, e1, e2, e3};
    for (int i = 0; i < 4; ++i) {
      out[i] = _mm256_castps256_ps128(e[i]);
      out[4 + i] = _mm256_extractf128_ps(e[i], 1);
    }
  };
  for (int64_t j = 0; j < supers; ++j) {
    prefetch.At(j * 256);
    __m256 totals[4], scale[4], offset[4];
    for (int r = 0; r < 4; ++r) {
      const KGroupTerms g =
          GroupTermsOf<kType>(w + r * row_bytes + j * static_cast<int64_t>(sizeof(KBlockOf<kType>)), acts[j], 1.0f);
      totals[r] = g.totals;
      scale[r] = g.scale;
      offset[r] = g.offset;
    }
    __m128 t[8], c[8], o[8];
    transpose(totals, t);
    transpose(scale, c);
    if constexpr (kType != DType::kQ6_K) transpose(offset, o);
    for (int s = 0; s < 8; ++s) {  // group s is element i of the totals order
      const int i = TotalsElement<kType>(s);
      acc = _mm_fmadd_ps(t[i], c[i], acc);
      if constexpr (kType != DType::kQ6_K) acc_min = _mm_add_ps(acc_min, o[i]);
    }
  }
  _mm_storeu_ps(y, _mm_add_ps(acc, acc_min));
}

// RowsFn's work for one token: the fixed-point sums every row, in address order; the float sums every whole
// quad of rows (the last num_rows % 4 rows are left to the tiles).
template <DType kType, class Out>
int64_t KQuantRowStream(const uint8_t* w, int64_t row_bytes, int64_t num_rows, const BlockQ8Act* act,
                        int64_t num_blocks, Out* y) {
  const int64_t supers = num_blocks / 8;  // K-quant rows hold whole super-blocks
  thread_local std::vector<KStreamAct> acts;  // [cols / 256], reused across calls
  if (static_cast<int64_t>(acts.size()) < supers) acts.resize(supers);
  PrepareKStreamActs<kType>(act, supers, acts.data());
  if constexpr (std::is_same_v<Out, float>) {
    const int64_t quads = num_rows / 4 * 4;
    for (int64_t r = 0; r < quads; r += 4) {
      KQuantQuadFloat<kType>(w + r * row_bytes, row_bytes, acts.data(), supers, y + r);
    }
    return quads;
  } else {
    for (int64_t r = 0; r < num_rows; ++r) y[r] = KQuantRowSum<kType>(w + r * row_bytes, acts.data(), supers);
    return num_rows;
  }
}

}  // namespace tpserve::internal::TPSERVE_ISA_NS
