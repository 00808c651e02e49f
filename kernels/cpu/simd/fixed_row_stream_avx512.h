// Internal to matmul_float.cc, the AVX-512 level: MatMulFixedPoint's decode (1 to kFixedStreamMaxTokens
// tokens) of float weights (F32, F16, BF16) as one stream through the rows, one row at a time.
//
// A fixed-point output is a sum of one f32 fma chain per 16-column chunk (matmul_float.cc). Here the lanes are
// a row's chunks: a block of 256 columns is 16 chunks, its weights transposed (transpose16_avx512.h) so that
// vector c holds column c of each chunk, against the tokens' activations transposed the same way once per
// call. The chains, their RNE(S · 2^32) and the int64 sums are the panels' (order-free integers).
//
// The panels' direct path (FixedDirectTokens) reads 16 rows at once: 16 streams, where one is faster here (the
// float rows too: FloatRowStream). One thread, weights in 2 MiB pages cycled from memory, us per call, 16 rows
// at once (their words transposed the same way) -> this: F16 576 x 1536 161-165 -> 126-128 (103 % of the
// one-core triad), 1536 x 576 161-165 -> 117-121, BF16 153-161 -> 112-134; SmolLM2 decode at one thread, tok/s,
// F16 45.7-47.9 -> 47.4-50.0, BF16 44.6-45.5 -> 47.1-48.4. F32 (8 × 8 blocks of f32 before, without the next
// group's prefetch): 576 x 1536 358-360 -> 258-261, but 1536 x 576 235-238 -> 260-272; its decode at one thread
// 25.8 -> 26.2-26.6 tok/s, at two 45.6-45.8 -> 46.0-48.6.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "common/dtype.h"
#include "kernels/cpu/simd/intrinsics.h"
#include "kernels/cpu/simd/tile_prefetch.h"
#include "kernels/cpu/simd/transpose16_avx512.h"

namespace tpserve::internal::TPSERVE_ISA_NS {

inline constexpr int64_t kFixedStreamMaxTokens = 3;

namespace fixed_row_stream {

constexpr int64_t kBlockCols = 256;  // 16 chunks of 16 columns, one per lane
template <DType kType>
constexpr int64_t kBlockBytes = kBlockCols * (kType == DType::kF32 ? 4 : 2);

// The tokens' activations, each block's 16 × 16 transposed: xt[(t · blocks + b) · 256 + 16 c + l] is token t's
// column 256 b + 16 l + c (0 past cols). In the calling thread's scratch.
inline const float* TransposedTokens(const uint8_t* x, int64_t x_stride, int64_t num_tokens, int64_t cols,
                                     int64_t blocks) {
  thread_local std::vector<float> scratch;
  scratch.assign(num_tokens * blocks * kBlockCols, 0.0f);
  for (int64_t t = 0; t < num_tokens; ++t) {
    const auto* xt = reinterpret_cast<const float*>(x + t * x_stride);
    float* out = scratch.data() + t * blocks * kBlockCols;
    for (int64_t k = 0; k < cols; ++k) {
      const int64_t b = k / kBlockCols, l = k % kBlockCols / 16, c = k % 16;
      out[b * kBlockCols + 16 * c + l] = xt[k];
    }
  }
  return scratch.data();
}

// Rows [0, num_rows) against NT tokens; y[t · y_stride + r].
template <DType kType, int NT>
void Rows(const uint8_t* w, int64_t row_bytes, int64_t num_rows, const float* xt, int64_t blocks, int64_t cols,
          int64_t* y, int64_t y_stride) {
  const int64_t whole = cols / kBlockCols;
  for (int64_t r = 0; r < num_rows; ++r) {
    const uint8_t* row = w + r * row_bytes;
    __m512i sums[NT][2];  // lanes 0-7 and 8-15 of each token's terms
    for (auto& s : sums) s[0] = s[1] = _mm512_setzero_si512();
    auto block = [&](const uint8_t* weights, int64_t b) __attribute__((always_inline)) {
      __m512 s[NT];
      auto chains = [&](int c, __m512 wc) __attribute__((always_inline)) {  // position c of every chunk
        for (int i = 0; i < NT; ++i) {
          const __m512 xc = _mm512_loadu_ps(xt + (i * blocks + b) * kBlockCols + 16 * c);
          s[i] = c == 0 ? _mm512_mul_ps(wc, xc) : _mm512_fmadd_ps(wc, xc, s[i]);
        }
      };
      if constexpr (kType == DType::kF32) {
        __m512 t[16];
        for (int l = 0; l < 16; ++l) t[l] = _mm512_loadu_ps(reinterpret_cast<const float*>(weights) + 16 * l);
        TransposeFloats16(t);
        for (int c = 0; c < 16; ++c) chains(c, t[c]);
      } else {
        __m512i t[8];
        TransposeWords16([&](int l) { return weights + 32 * l; }, t);
        for (int c = 0; c < 16; ++c) chains(c, WidenWords<kType>(t[c % 8], c / 8));
      }
      constexpr int kNearest = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
      for (int i = 0; i < NT; ++i) {
        const __m512 scaled = _mm512_mul_ps(s[i], _mm512_set1_ps(0x1p32f));
        const __m512i lo = _mm512_cvt_roundps_epi64(_mm512_castps512_ps256(scaled), kNearest);
        const __m512i hi = _mm512_cvt_roundps_epi64(_mm512_extractf32x8_ps(scaled, 1), kNearest);
        sums[i][0] = _mm512_add_epi64(sums[i][0], lo);
        sums[i][1] = _mm512_add_epi64(sums[i][1], hi);
      }
    };
    constexpr int64_t kBytes = kBlockBytes<kType>;
    for (int64_t b = 0; b < whole; ++b) {
      const char* ahead = reinterpret_cast<const char*>(row) + b * kBytes + kPrefetchAheadBytes;
      for (int64_t off = 0; off < kBytes; off += 64) PrefetchLine(ahead + off);
      block(row + b * kBytes, b);
    }
    if (whole < blocks) {  // the zero-padded last block: its padding lanes' chains are +0, their terms 0
      alignas(64) uint8_t tail[kBytes] = {};
      std::memcpy(tail, row + whole * kBytes, (cols - whole * kBlockCols) * (kBytes / kBlockCols));
      block(tail, whole);
    }
    for (int i = 0; i < NT; ++i) {
      y[i * y_stride + r] = _mm512_reduce_add_epi64(_mm512_add_epi64(sums[i][0], sums[i][1]));
    }
  }
}

}  // namespace fixed_row_stream

// RowsFn (matmul_tile.h) of the fixed-point float tables for 1 to kFixedStreamMaxTokens tokens: every row.
template <DType kType>
int64_t FixedRowStream(const uint8_t* w, int64_t row_bytes, int64_t num_rows, const uint8_t* x, int64_t x_stride,
                       int64_t num_tokens, int64_t cols, int64_t* y, int64_t y_stride) {
  using namespace fixed_row_stream;
  const int64_t blocks = (cols + kBlockCols - 1) / kBlockCols;
  const float* xt = TransposedTokens(x, x_stride, num_tokens, cols, blocks);
  switch (num_tokens) {
    case 1: Rows<kType, 1>(w, row_bytes, num_rows, xt, blocks, cols, y, y_stride); break;
    case 2: Rows<kType, 2>(w, row_bytes, num_rows, xt, blocks, cols, y, y_stride); break;
    default: Rows<kType, 3>(w, row_bytes, num_rows, xt, blocks, cols, y, y_stride); break;
  }
  return num_rows;
}

}  // namespace tpserve::internal::TPSERVE_ISA_NS
