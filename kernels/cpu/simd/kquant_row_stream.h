// Internal to quant_row_quads.h, the AVX2 and AVX-512 levels: one or two tokens (decode) against the rows of
// Q4_K, Q5_K and Q6_K a whole 256-value super-block per step. The row quads (QuadReader) spend a step on each
// 32-value group of four rows: two 128-bit gathers, the group's scales decoded every eighth step and kept in
// memory, four-lane products. Here each step takes a row's super-block in full loads, and its level's terms
// (kquant_terms_avx512.h: VNNI over the groups in the halves of four vectors; kquant_terms_avx2.h: maddubs over
// eight) give its eight groups' exact totals and their scales and products in one vector each.
// Each super-block is decoded once (DecodeSuperBlock) for the tokens that read it (TermsOf).
// - MatMulFixedPoint's sums (the row-parallel layers: attention output, FFN down) read one row at a time, in
//   address order, one stream, as quant_row_stream_avx512.h reads the 32-value types: per group the exact
//   integer total, the f32 products (d · scale) · 2^32 · d_a and (−dmin · min) · 2^32 · Σa (Q6_K: d · 2^32 ·
//   d_a), the term rounded to nearest even; int64 terms add in any order.
// - MatMul's float sums chain an fma per group in group order, a chain along the row: four (row, token) pairs
//   at a time, their terms transposed into lanes (KQuantPairsFloat), so that the four chains run side by side.
// One thread, us per call, quads -> this, 1536 x 576 in the cache (bench/README.md, "K-quants by the super-block"):
// - AVX-512: fixed point Q4_K 29.4-29.9 -> 13.9-14.3, Q6_K 35.9-36.9 -> 14.6-15.2; float Q4_K 27.1 -> 15.5-15.7,
//   Q6_K 33.4 -> 16.0-16.1.
// - AVX2: fixed point Q4_K 61.2 -> 37.2, Q5_K 70.7 -> 43.8, Q6_K 83.1 -> 41.5; float Q4_K 50.3-52.3 -> 38.9-39.8,
//   Q6_K 77.8-87.5 -> 36.0-44.3; 2048 x 8192 from memory 1.5-2.2x.
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

// The fixed-point sums of one row against N tokens (token t's super-blocks at acts + t · supers; its result to
// y[t · y_stride]), each super-block decoded once for all of them.
template <DType kType, int N>
void KQuantRowFixed(const uint8_t* row, const KStreamAct* acts, int64_t supers, int64_t* y, int64_t y_stride) {
  constexpr int64_t kBlock = sizeof(KBlockOf<kType>);
  KFixedSum fixed[N];
  for (int64_t j = 0; j < supers; ++j) {
    const uint8_t* blk = row + j * kBlock;
    PrefetchStreamAhead(blk, kBlock);
    const KWeights k = DecodeSuperBlock<kType>(blk, kFixedPointScale);
    for (int t = 0; t < N; ++t) {
      const KGroupTerms g = TermsOf<kType>(k, acts[t * supers + j]);
      __m256 terms = _mm256_mul_ps(g.totals, g.scale);
      if constexpr (kType != DType::kQ6_K) terms = _mm256_add_ps(terms, g.offset);
      fixed[t].Add(terms);
    }
  }
  for (int t = 0; t < N; ++t) y[t * y_stride] = fixed[t].Total();
}

// Four (row, token) pairs' float sums (MatMul's), pair i in lane i: per group in order, acc = fma(total, scale,
// acc) and (Q4_K, Q5_K) acc_min += offset, as FloatSums. The pairs are 4 / kTokens rows against kTokens tokens
// each, a super-block decoded once for its row's pairs, and the four pairs' terms are transposed into group
// vectors (element i of pair p's vectors to lane p of vector i), so that the four chains run side by side.
template <DType kType, int kTokens>
void KQuantPairsFloat(const uint8_t* const (&rows)[4 / kTokens], int64_t row_bytes,
                      const KStreamAct* const (&acts)[kTokens], int64_t supers, float* y) {
  constexpr int64_t kBlock = sizeof(KBlockOf<kType>);
  __m128 acc = _mm_setzero_ps(), acc_min = _mm_setzero_ps();
  TilePrefetch<kBlock, 4 / kTokens, true> prefetch(rows[0], row_bytes);  // the rows are adjacent
  // Element i of four pairs' vectors (pair p in v[p]) as lane p of out[i].
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
    KWeights k;
    for (int p = 0; p < 4; ++p) {
      if (p % kTokens == 0) k = DecodeSuperBlock<kType>(rows[p / kTokens] + j * kBlock, 1.0f);
      const KGroupTerms g = TermsOf<kType>(k, acts[p % kTokens][j]);
      totals[p] = g.totals;
      scale[p] = g.scale;
      offset[p] = g.offset;
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

// RowsFn's work for one or two tokens (kKQuantStreamMaxTokens): every row against every token. The fixed-point
// sums take a row at a time, in address order; the float sums take the (row, token) pairs four at a time, row by
// row (a last group's missing pairs repeat its first, never stored). x: the tokens' activation blocks, x_stride
// bytes apart. The 1B Q4_K_M model at two threads, batch 2, tok/s, QuadTokenRows -> this: AVX-512 28.5-33.1 ->
// 70.1-72.7, AVX2 (the tiles before) 22.3-23.7 -> 37.2-40.8. From three tokens QuadTokenRows leads: each token's
// terms here take a transposing tree of their own, where its 4 × 4 tokens and rows share one (this path taken
// further, AVX-512: batch 3 47.1-62.4 -> 43.5-50.4, batch 4 56.4-69.4 -> 52.1-62.3).
inline constexpr int64_t kKQuantStreamMaxTokens = 2;

template <DType kType, class Out>
int64_t KQuantRowStream(const uint8_t* w, int64_t row_bytes, int64_t num_rows, const uint8_t* x, int64_t x_stride,
                        int64_t num_tokens, int64_t num_blocks, Out* y, int64_t y_stride) {
  const int64_t supers = num_blocks / 8;  // K-quant rows hold whole super-blocks
  thread_local std::vector<KStreamAct> acts;  // [tokens][cols / 256], reused across calls
  if (static_cast<int64_t>(acts.size()) < num_tokens * supers) acts.resize(num_tokens * supers);
  for (int64_t t = 0; t < num_tokens; ++t) {
    PrepareKStreamActs<kType>(reinterpret_cast<const BlockQ8Act*>(x + t * x_stride), supers, acts.data() + t * supers);
  }
  if constexpr (std::is_same_v<Out, float>) {
    // Groups of 4 / T rows, each against the T tokens; a last group's missing rows repeat its first, never stored.
    const auto group = [&]<int T>(std::integral_constant<int, T>) {
      const KStreamAct* token_acts[T];
      for (int t = 0; t < T; ++t) token_acts[t] = acts.data() + t * supers;
      for (int64_t r0 = 0; r0 < num_rows; r0 += 4 / T) {
        const uint8_t* rows[4 / T];
        for (int i = 0; i < 4 / T; ++i) rows[i] = w + (r0 + i < num_rows ? r0 + i : r0) * row_bytes;
        float v[4];  // pair p: row r0 + p / T, token p % T
        KQuantPairsFloat<kType, T>(rows, row_bytes, token_acts, supers, v);
        for (int p = 0; p < 4 && r0 + p / T < num_rows; ++p) y[(p % T) * y_stride + r0 + p / T] = v[p];
      }
    };
    static_assert(kKQuantStreamMaxTokens == 2);
    if (num_tokens == 1) {
      group(std::integral_constant<int, 1>{});
    } else {
      group(std::integral_constant<int, 2>{});
    }
  } else {
    const auto fixed = num_tokens == 1 ? KQuantRowFixed<kType, 1> : KQuantRowFixed<kType, 2>;
    for (int64_t r = 0; r < num_rows; ++r) fixed(w + r * row_bytes, acts.data(), supers, y + r, y_stride);
  }
  return num_rows;
}

}  // namespace tpserve::internal::TPSERVE_ISA_NS
