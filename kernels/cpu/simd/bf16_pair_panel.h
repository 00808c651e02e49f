// Internal to matmul_float.cc on the avx512bf16 level: BF16 weights' panels through AVX512-BF16's dot
// product. VDPBF16PS holds a pair of bf16 in each f32 lane and does acc = fma(a_hi, b_hi, acc), then
// acc = fma(a_lo, b_lo, acc), denormal inputs read as zero and denormal results written as zero (the Intel
// SDM's definition; this Zen 5 matched it on 96 million random lanes, against 2.2 million mismatches for
// lo first). The products of two bf16 are exact in f32, so that is two f32 fmas; MatMul runs BF16 weights
// under FlushDenormalsScope (matmul.cc), so the other levels' fmas flush the same way, and their
// activations are the same bf16-rounded values.
//
// A panel holds its rows in lanes, so a pair can be any two of a row's columns: each pair holds two
// consecutive steps of one output's chain in the canonical order (matmul_float.cc), and one instruction
// does two fmas of 16 rows where an fma does one:
// - FloatPanel (an output's lane l is the chain over columns l, l + 16, l + 32, ...): chunks 2m and 2m + 1
//   pair up, lane l's pair m (hi: column 32m + l, lo: 32m + 16 + l). Past the last chunk (an odd count)
//   the lo weight is -0 against a +0 activation: adding -0 leaves every value as it was, -0 included.
// - FixedPointFloatPanel (a chunk's chain over its 16 columns in order): pair i of chunk j (hi: column
//   16j + 2i, lo: 16j + 2i + 1), from +0. Its first step is fma(w, x, +0) where the f32 chain starts with
//   w · x: they differ only in the sign of a zero, and both zeros round to the integer 0.
// Columns past `cols` are +0 weights and activations, as the f32 panels' zero-padded last chunk.
// The activations are packed in the same pairs once per call (the tables' panel_prepare).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/cpu/simd/float_panel.h"
#include "kernels/cpu/simd/intrinsics.h"
#include "kernels/cpu/simd/transpose16_avx512.h"

namespace tpserve::internal::TPSERVE_ISA_NS {

// A panel's pairs, rows in lanes: column i of the packing (a PackedColumn of f32 slots holding the pairs'
// bits), FloatPanel's lane-major (lane l's pairs m consecutive: l · pairs + m), FixedPointFloatPanel's
// chunk-major (j · 8 + i).
template <int kRows>
struct PairPanel {
  PackedColumn<kRows>* columns;
  int64_t pairs;  // pairs per lane (FloatPanel) or chunks (FixedPointFloatPanel)
  float* At(int64_t i) const { return columns[i].r; }
};

namespace bf16_pairs {

constexpr int64_t kPairCols = 2 * kPanelChunk;  // the columns of one pair in every lane (FloatPanel)

inline __m512i Bits(__m512 v) { return _mm512_castps_si512(v); }
inline __m512bh AsPairs(__m512i v) { return (__m512bh)v; }
inline __mmask16 First(int64_t n) { return static_cast<__mmask16>(n >= 16 ? 0xffff : n <= 0 ? 0 : (1u << n) - 1); }
inline __mmask32 First32(int64_t n) { return n >= 32 ? 0xffffffffu : n <= 0 ? 0u : (1u << n) - 1; }

// The 16 f32 of x at column c (columns past cols +0), as bits.
inline __m512i Load16(const float* x, int64_t c, int64_t cols) {
  return Bits(_mm512_maskz_loadu_ps(First(cols - c), x + c));
}

// dword l = (hi[l] high half) << 16 | (lo[l] high half) >> 16, for two vectors of f32 bits.
inline __m512i Pair(__m512i hi, __m512i lo) {
  return _mm512_or_si512(_mm512_and_si512(hi, _mm512_set1_epi32(static_cast<int>(0xffff0000u))),
                         _mm512_srli_epi32(lo, 16));
}

// One thread's scratch for the tokens' pairs.
inline uint32_t* PairScratch(int64_t n) {
  thread_local std::vector<uint32_t> scratch;
  if (static_cast<int64_t>(scratch.size()) < n) scratch.resize(n);
  return scratch.data();
}

// Rows [16g, 16g + 16) of the pairs t[r] (16 dwords each, rows past the panel zero) to lanes: t[l] holds
// lane l of the 16 rows.
inline void ToLanes(__m512i (&t)[16]) {
  __m512 f[16];
  for (int r = 0; r < 16; ++r) f[r] = _mm512_castsi512_ps(t[r]);
  TransposeFloats16(f);
  for (int r = 0; r < 16; ++r) t[r] = _mm512_castps_si512(f[r]);
}

// t[k]: dword k of rows 16g..16g+15 of the panel, each row's 32 words from column c (+0 past cols) through
// shape (the packing's pairing), rows past num_rows zero.
template <class Shape>
inline void RowsToLanes(const uint8_t* w, int64_t row_bytes, int num_rows, int g, int64_t c, int64_t cols,
                        Shape shape, __m512i (&t)[16]) {
  for (int i = 0; i < 16; ++i) {
    t[i] = _mm512_setzero_si512();
    if (16 * g + i >= num_rows) continue;
    const auto* row = reinterpret_cast<const uint16_t*>(w + (16 * g + i) * row_bytes);
    t[i] = shape(_mm512_maskz_loadu_epi16(First32(cols - c), row + c));
  }
  ToLanes(t);
}

}  // namespace bf16_pairs

// ---- FloatPanel ----

// PanelPrepareFn: token t's pairs at t · *prepared_stride bytes, lane l's pair m at m · 16 + l.
inline const uint8_t* PrepareFloatPairs(const uint8_t* x, int64_t x_stride, int64_t num_tokens, int64_t cols,
                                        int64_t* prepared_stride) {
  using namespace bf16_pairs;
  const int64_t pairs = (cols + kPairCols - 1) / kPairCols;
  uint32_t* out = PairScratch(num_tokens * pairs * 16);
  for (int64_t t = 0; t < num_tokens; ++t) {
    const auto* xt = reinterpret_cast<const float*>(x + t * x_stride);
    for (int64_t m = 0; m < pairs; ++m) {
      const int64_t c = m * kPairCols;
      _mm512_storeu_si512(out + (t * pairs + m) * 16, Pair(Load16(xt, c, cols), Load16(xt, c + 16, cols)));
    }
  }
  *prepared_stride = pairs * 16 * static_cast<int64_t>(sizeof(uint32_t));
  return reinterpret_cast<const uint8_t*>(out);
}

// Rows [0, num_rows) of w packed lane-major: lane l's pair m of the 48 rows.
inline PairPanel<kFloatPanelRows> PackFloatPairs(const uint8_t* w, int64_t row_bytes, int num_rows, int64_t cols) {
  using namespace bf16_pairs;
  thread_local std::vector<PackedColumn<kFloatPanelRows>> scratch;
  const int64_t chunks = (cols + kPanelChunk - 1) / kPanelChunk, pairs = (chunks + 1) / 2;
  if (static_cast<int64_t>(scratch.size()) < 16 * pairs) scratch.resize(16 * pairs);
  PairPanel<kFloatPanelRows> packed{scratch.data(), pairs};
  // Word 2l of a pair vector is column 32m + 16 + l (lo), word 2l + 1 column 32m + l (hi).
  alignas(64) static constexpr uint16_t kIndex[32] = {16, 0, 17, 1, 18, 2, 19, 3, 20, 4, 21, 5, 22, 6, 23, 7,
                                                      24, 8, 25, 9, 26, 10, 27, 11, 28, 12, 29, 13, 30, 14, 31, 15};
  const __m512i index = _mm512_load_si512(kIndex);
  const __m512i minus_zero = _mm512_set1_epi16(static_cast<int16_t>(0x8000));
  for (int64_t m = 0; m < pairs; ++m) {
    const int64_t c = m * kPairCols;
    const bool lo_past = 2 * m + 1 >= chunks;  // no chunk 2m + 1: its lo weights are -0
    auto pair = [&](__m512i words) {
      const __m512i paired = _mm512_permutexvar_epi16(index, words);
      return lo_past ? _mm512_mask_mov_epi16(paired, 0x55555555u, minus_zero) : paired;
    };
    for (int g = 0; g < kFloatPanelRows / 16; ++g) {
      __m512i t[16];
      RowsToLanes(w, row_bytes, num_rows, g, c, cols, pair, t);
      for (int l = 0; l < 16; ++l) {
        _mm512_store_si512(packed.At(l * pairs + m) + 16 * g, t[l]);
      }
    }
  }
  return packed;
}

// NT tokens against the packed pairs: y[t * y_stride + r] for r < num_rows (FloatPanelTokens' lanes, fold and
// blocking, two chunks per step).
template <int NT>
void FloatPairTokens(const PairPanel<kFloatPanelRows>& packed, int num_rows, const uint8_t* x, int64_t x_stride,
                     float* y, int64_t y_stride) {
  using bf16_pairs::AsPairs;
  constexpr int kParts = kFloatPanelRows / 16;
  constexpr int64_t kBlockPairs = kFloatBlockChunks / 2;
  const int64_t pairs = packed.pairs;
  const uint32_t* xt[NT];
  for (int t = 0; t < NT; ++t) xt[t] = reinterpret_cast<const uint32_t*>(x + t * x_stride);
  alignas(64) float lanes[kPanelChunk][NT][kFloatPanelRows];  // lanes[l][t][r]: output (t, r)'s lane l
  for (int64_t m0 = 0; m0 < pairs; m0 += kBlockPairs) {
    const int64_t m1 = std::min(pairs, m0 + kBlockPairs);
    for (int l = 0; l < kPanelChunk; ++l) {
      __m512 acc[NT][kParts];
      for (int t = 0; t < NT; ++t) {
        for (int p = 0; p < kParts; ++p) acc[t][p] = m0 == 0 ? _mm512_setzero_ps() : _mm512_load_ps(lanes[l][t] + 16 * p);
      }
      for (int64_t m = m0; m < m1; ++m) {
        const float* wl = packed.At(l * pairs + m);
        __m512bh wv[kParts];
        for (int p = 0; p < kParts; ++p) wv[p] = AsPairs(_mm512_load_si512(wl + 16 * p));
        for (int t = 0; t < NT; ++t) {
          const __m512bh xv = AsPairs(_mm512_set1_epi32(static_cast<int>(xt[t][m * 16 + l])));
          for (int p = 0; p < kParts; ++p) acc[t][p] = _mm512_dpbf16_ps(acc[t][p], wv[p], xv);
        }
      }
      for (int t = 0; t < NT; ++t) {
        for (int p = 0; p < kParts; ++p) _mm512_store_ps(lanes[l][t] + 16 * p, acc[t][p]);
      }
    }
  }
  FoldPanelLanes(lanes, num_rows, y, y_stride);
}

// PanelFn of BF16's MatMul table; x: PrepareFloatPairs' tokens.
inline void FloatPairPanel(const uint8_t* w, int64_t row_bytes, int num_rows, const uint8_t* x, int64_t x_stride,
                           int64_t num_tokens, int64_t cols, float* y, int64_t y_stride) {
  const PairPanel<kFloatPanelRows> packed = PackFloatPairs(w, row_bytes, num_rows, cols);
  static constexpr auto kTokens =
      ByTokenCount<kFloatPanelTokens>([](auto nt) { return &FloatPairTokens<decltype(nt)::value>; });
  const int64_t passes = (num_tokens + kFloatPanelTokens - 1) / kFloatPanelTokens;
  for (int64_t t = 0; t < num_tokens; t += kFloatPanelTokens) {
    // The next panel's rows, a slice per pass (tile_prefetch.h).
    PrefetchPanelSlice(w + kFloatPanelRows * row_bytes, kFloatPanelRows * row_bytes, t / kFloatPanelTokens, passes);
    const int64_t nt = std::min<int64_t>(kFloatPanelTokens, num_tokens - t);
    kTokens[nt - 1](packed, num_rows, x + t * x_stride, x_stride, y + t * y_stride, y_stride);
  }
}

// ---- FixedPointFloatPanel ----

// PanelPrepareFn: token t's pairs at t · *prepared_stride bytes, chunk j's pair i at 8j + i.
inline const uint8_t* PrepareFixedPairs(const uint8_t* x, int64_t x_stride, int64_t num_tokens, int64_t cols,
                                        int64_t* prepared_stride) {
  using namespace bf16_pairs;
  const int64_t chunks = (cols + kPanelChunk - 1) / kPanelChunk, padded = (chunks + 1) / 2 * 2;
  uint32_t* out = PairScratch(num_tokens * padded * 8);
  // Pair i of a chunk: f32 2i's high half (the hi word) and 2i + 1's (the lo word); two chunks' pairs per
  // vector, from f32 columns c..c+15 (a) and c+16..c+31 (b).
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
  for (int64_t t = 0; t < num_tokens; ++t) {
    const auto* xt = reinterpret_cast<const float*>(x + t * x_stride);
    for (int64_t j = 0; j < chunks; j += 2) {
      const int64_t c = j * kPanelChunk;
      const __m512i a = Load16(xt, c, cols), b = Load16(xt, c + 16, cols);
      const __m512i hi = _mm512_permutex2var_epi32(a, even, b), lo = _mm512_permutex2var_epi32(a, odd, b);
      _mm512_storeu_si512(out + (t * padded + j) * 8, Pair(hi, lo));
    }
  }
  *prepared_stride = padded * 8 * static_cast<int64_t>(sizeof(uint32_t));
  return reinterpret_cast<const uint8_t*>(out);
}

// Rows [0, num_rows) of w packed chunk-major: chunk j's pair i of the 32 rows.
inline PairPanel<kFixedPanelRows> PackFixedPairs(const uint8_t* w, int64_t row_bytes, int num_rows, int64_t cols) {
  using namespace bf16_pairs;
  thread_local std::vector<PackedColumn<kFixedPanelRows>> scratch;
  const int64_t chunks = (cols + kPanelChunk - 1) / kPanelChunk, padded = (chunks + 1) / 2 * 2;
  if (static_cast<int64_t>(scratch.size()) < 8 * padded) scratch.resize(8 * padded);
  PairPanel<kFixedPanelRows> packed{scratch.data(), chunks};
  for (int64_t j = 0; j < chunks; j += 2) {  // two chunks' 16 pairs per row at a time
    const int64_t c = j * kPanelChunk;
    // A pair's first column in its hi word: each dword's halves swapped.
    auto pair = [](__m512i words) { return _mm512_rol_epi32(words, 16); };
    for (int g = 0; g < kFixedPanelRows / 16; ++g) {
      __m512i t[16];
      RowsToLanes(w, row_bytes, num_rows, g, c, cols, pair, t);
      for (int k = 0; k < 16; ++k) _mm512_store_si512(packed.At(j * 8 + k) + 16 * g, t[k]);
    }
  }
  return packed;
}

// NT tokens' sums over every chunk: sums[t][r] += RNE(S · 2^32), S chunk's chain for row r (FixedPanelTokens').
template <int NT>
void FixedPairTokens(const PairPanel<kFixedPanelRows>& packed, const uint8_t* x, int64_t x_stride,
                     int64_t (*sums)[kFixedPanelRows]) {
  using bf16_pairs::AsPairs;
  constexpr int kParts = kFixedPanelRows / 16;
  const uint32_t* xt[NT];
  for (int t = 0; t < NT; ++t) xt[t] = reinterpret_cast<const uint32_t*>(x + t * x_stride);
  PanelSums acc[NT];
  for (int64_t j = 0; j < packed.pairs; ++j) {
    FixedRows s[NT];
    for (int t = 0; t < NT; ++t) s[t] = FixedRows::Zero();
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i) {
      const float* wi = packed.At(j * 8 + i);
      __m512bh wv[kParts];
      for (int p = 0; p < kParts; ++p) wv[p] = AsPairs(_mm512_load_si512(wi + 16 * p));
      for (int t = 0; t < NT; ++t) {
        const __m512bh xv = AsPairs(_mm512_set1_epi32(static_cast<int>(xt[t][j * 8 + i])));
        for (int p = 0; p < kParts; ++p) s[t].v[p] = _mm512_dpbf16_ps(s[t].v[p], wv[p], xv);
      }
    }
    for (int t = 0; t < NT; ++t) acc[t].Add(s[t], sums[t]);
  }
  for (int t = 0; t < NT; ++t) acc[t].Finish(sums[t]);
}

// PanelFn of BF16's MatMulFixedPoint table from kFixedStreamMaxTokens + 1 tokens; x: PrepareFixedPairs' tokens.
inline void FixedPairPanel(const uint8_t* w, int64_t row_bytes, int num_rows, const uint8_t* x, int64_t x_stride,
                           int64_t num_tokens, int64_t cols, int64_t* y, int64_t y_stride) {
  static_assert(kFixedTermBias == 0, "AVX-512 rounds f32 to int64 directly");
  const PairPanel<kFixedPanelRows> packed = PackFixedPairs(w, row_bytes, num_rows, cols);
  static constexpr auto kTokens =
      ByTokenCount<kFixedPanelTokens>([](auto nt) { return &FixedPairTokens<decltype(nt)::value>; });
  const int64_t passes = (num_tokens + kFixedPanelTokens - 1) / kFixedPanelTokens;
  for (int64_t t = 0; t < num_tokens; t += kFixedPanelTokens) {
    PrefetchPanelSlice(w + kFixedPanelRows * row_bytes, kFixedPanelRows * row_bytes, t / kFixedPanelTokens, passes);
    const int nt = static_cast<int>(std::min<int64_t>(kFixedPanelTokens, num_tokens - t));
    alignas(64) int64_t sums[kFixedPanelTokens][kFixedPanelRows] = {};
    kTokens[nt - 1](packed, x + t * x_stride, x_stride, sums);
    for (int i = 0; i < nt; ++i) {
      for (int r = 0; r < num_rows; ++r) y[(t + i) * y_stride + r] = sums[i][r];
    }
  }
}

}  // namespace tpserve::internal::TPSERVE_ISA_NS
