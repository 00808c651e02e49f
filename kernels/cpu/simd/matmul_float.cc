// Tiles for float weights (F32, F16, BF16) times f32 activations, one instruction-set level.
//
// MatMul's canonical order (every level): y[t, r] = Fold16(acc) (canonical_sum.h) where lane l < 16
// of acc starts at +0 and takes acc[l] = fma(w[k], x[k], acc[l]) for k = l, l + 16, l + 32, ... in
// order; the last chunk is zero-padded to 16 columns and its padding fmas are done too (they turn a
// -0 lane into +0, so they are part of the order). AVX-512 holds the 16 lanes in one register, AVX2
// in two (columns k..k+7 and k+8..k+15), the portable level in 16 scalars with std::fma.
//
// MatMulFixedPoint's: 16-column chunks, each summed in f32 to one term rounded into int64
// (fixed_point_lanes.h); integer sums, so the order of the chunks does not matter.
//
// BF16 weights get their activations rounded to bf16 and run with denormals flushed (kernels/cpu/matmul.cc),
// in these same orders; on the avx512bf16 level their panels do two of a chain's fmas per VDPBF16PS
// (bf16_pair_panel.h).
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "common/dtype.h"
#include "kernels/cpu/matmul_fixed_point.h"
#include "kernels/cpu/matmul_tile.h"
#include "kernels/cpu/simd/canonical_sum.h"
#include "kernels/cpu/simd/fixed_point_lanes.h"

#if TPSERVE_FIXED_POINT_AVX2 && defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && \
    defined(__AVX512DQ__)
#define TPSERVE_MATMUL_AVX512 1
#endif
#include "kernels/cpu/simd/intrinsics.h"
#if TPSERVE_FIXED_POINT_AVX2
#include "kernels/cpu/simd/float_panel.h"
#include "kernels/cpu/simd/tile_prefetch.h"
#endif
#if TPSERVE_MATMUL_AVX512
#include "kernels/cpu/simd/fixed_row_stream_avx512.h"
#endif
#if TPSERVE_MATMUL_AVX512 && defined(__AVX512BF16__)
#include "kernels/cpu/simd/bf16_pair_panel.h"  // the avx512bf16 level (kernels/CMakeLists.txt)
#endif

namespace tpserve::internal::TPSERVE_ISA_NS {
namespace {

constexpr int64_t kLanes = 16;  // the canonical accumulator width

#if TPSERVE_FIXED_POINT_AVX2
// Loads 8 weights at p as f32 (the AVX2 float tile and every SIMD fixed-point tile).
struct Load8F32 {
  static constexpr int kBytes = 4;
  static constexpr DType kType = DType::kF32;
  static __m256 Load(const uint8_t* p) { return _mm256_loadu_ps(reinterpret_cast<const float*>(p)); }
};
struct Load8F16 {
  static constexpr int kBytes = 2;
  static constexpr DType kType = DType::kF16;
  static __m256 Load(const uint8_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
};
struct Load8BF16 {
  static constexpr int kBytes = 2;
  static constexpr DType kType = DType::kBF16;
  static __m256 Load(const uint8_t* p) {
    const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
  }
};
#endif

#if TPSERVE_MATMUL_AVX512
// Loads 16 weights starting at element k as f32; Tail loads only the `mask` ones (the others are 0).
// Whole chunks take plain loads: GCC treats a masked load as reading memory that may be the tile's
// accumulators, so inside the chunk loop it stored all NR x NT of them to the stack every chunk (F32
// 4 x 4 prefill tiles at 35 GFLOP/s of one core's 85).
struct LoadF32 {
  static constexpr int kBytes = 4;
  static __m512 Load(const uint8_t* row, int64_t k) { return _mm512_loadu_ps(reinterpret_cast<const float*>(row) + k); }
  static __m512 Tail(const uint8_t* row, int64_t k, __mmask16 mask) {
    return _mm512_maskz_loadu_ps(mask, reinterpret_cast<const float*>(row) + k);
  }
};
struct LoadF16 {
  static constexpr int kBytes = 2;
  static __m512 Load(const uint8_t* row, int64_t k) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(reinterpret_cast<const uint16_t*>(row) + k)));
  }
  static __m512 Tail(const uint8_t* row, int64_t k, __mmask16 mask) {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(mask, reinterpret_cast<const uint16_t*>(row) + k));
  }
};
struct LoadBF16 {
  static constexpr int kBytes = 2;
  static __m512 Widen(__m256i h) { return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)); }
  static __m512 Load(const uint8_t* row, int64_t k) {
    return Widen(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(reinterpret_cast<const uint16_t*>(row) + k)));
  }
  static __m512 Tail(const uint8_t* row, int64_t k, __mmask16 mask) {
    return Widen(_mm256_maskz_loadu_epi16(mask, reinterpret_cast<const uint16_t*>(row) + k));
  }
};

// One 16-column chunk of every output: w_at(r) is row r's 16 weights as f32, x_at(t) token t's activations.
template <int NR, int NT, class WeightsAt, class ActivationsAt>
inline void AddChunk(__m512 (&acc)[NR][NT], WeightsAt w_at, ActivationsAt x_at) {
  __m512 wv[NR];
  for (int r = 0; r < NR; ++r) wv[r] = w_at(r);
  for (int t = 0; t < NT; ++t) {
    const __m512 xv = x_at(t);
    for (int r = 0; r < NR; ++r) acc[r][t] = _mm512_fmadd_ps(wv[r], xv, acc[r][t]);
  }
}

template <class Loader, int NR, int NT>
void FloatTile(const uint8_t* w, int64_t row_bytes, const uint8_t* x, int64_t x_stride, int64_t cols, float* y,
               int64_t y_stride) {
  __m512 acc[NR][NT];
  for (int r = 0; r < NR; ++r)
    for (int t = 0; t < NT; ++t) acc[r][t] = _mm512_setzero_ps();
  auto x_row = [&](int t) { return reinterpret_cast<const float*>(x + t * x_stride); };
  const TilePrefetch<256 * Loader::kBytes, NR, false> prefetch(w, row_bytes);
  int64_t k = 0;
  for (; k + kLanes <= cols; k += kLanes) {
    prefetch.At(k);
    AddChunk(
        acc, [&](int r) { return Loader::Load(w + r * row_bytes, k); },
        [&](int t) { return _mm512_loadu_ps(x_row(t) + k); });
  }
  if (k < cols) {  // the tail chunk: masked-off lanes load 0
    const auto mask = static_cast<__mmask16>((1u << (cols - k)) - 1);
    AddChunk(
        acc, [&](int r) { return Loader::Tail(w + r * row_bytes, k, mask); },
        [&](int t) { return _mm512_maskz_loadu_ps(mask, x_row(t) + k); });
  }
  for (int t = 0; t < NT; ++t)
    for (int r = 0; r < NR; ++r) y[t * y_stride + r] = Fold16(acc[r][t]);
}

// One row's 16 lanes for FloatRowStream (below): FloatTile<Loader, 1, 1>'s.
template <class Loader>
struct RowChains {
  __m512 acc = _mm512_setzero_ps();
  void Add(const uint8_t* row, int64_t k, const float* xt) {
    acc = _mm512_fmadd_ps(Loader::Load(row, k), _mm512_loadu_ps(xt + k), acc);
  }
  void AddTail(const uint8_t* row, int64_t k, int64_t cols, const float* xt) {  // masked-off lanes load 0
    const auto mask = static_cast<__mmask16>((1u << (cols - k)) - 1);
    acc = _mm512_fmadd_ps(Loader::Tail(row, k, mask), _mm512_maskz_loadu_ps(mask, xt + k), acc);
  }
  float Fold() const { return Fold16(acc); }
};
#elif TPSERVE_FIXED_POINT_AVX2
// AVX2: the 16 lanes in two 8-lane halves, columns k..k+7 (lo) and k+8..k+15 (hi) of each chunk; a tail
// chunk goes through a zero-padded copy. One token takes both halves per chunk; several take the halves in
// two passes (kHalfPassOutputs).
using LoadF32 = Load8F32;
using LoadF16 = Load8F16;
using LoadBF16 = Load8BF16;

// The most outputs of a tile that takes the halves of a chunk one after the other: one accumulator per
// output beside the tokens' activations and a weight in the 16 ymm registers. Measured per type
// (tpserve-bench-kernels, 576 x 1536 at T=128, 2 threads, GFLOP/s): 12 (4 x 3): F32 84-87, F16 108-114;
// 8 (4 x 2): F32 71-74, F16 117-125, BF16 98 against 96. The 16-bit types' conversions take the registers
// and ports that more outputs would need.
template <class Loader>
constexpr int kHalfPassOutputs = Loader::kBytes == 4 ? 12 : 8;

template <class Loader, int NR, int NT>
void FloatTile(const uint8_t* w, int64_t row_bytes, const uint8_t* x, int64_t x_stride, int64_t cols, float* y,
               int64_t y_stride) {
  constexpr int kTokensPerPass = kHalfPassOutputs<Loader> / NR;
  if constexpr (NT > 1 && NT > kTokensPerPass) {
    // More outputs than accumulators: tokens in groups. Which outputs share a loop changes, never an
    // output's own sequence.
    FloatTile<Loader, NR, kTokensPerPass>(w, row_bytes, x, x_stride, cols, y, y_stride);
    FloatTile<Loader, NR, NT - kTokensPerPass>(w, row_bytes, x + kTokensPerPass * x_stride, x_stride, cols,
                                               y + kTokensPerPass * y_stride, y_stride);
  } else {
    // w_at(r): a chunk's first weight byte in row r; x_at(t): its first activation of token t.
    __m256 lo[NR][NT], hi[NR][NT];
    for (int r = 0; r < NR; ++r)
      for (int t = 0; t < NT; ++t) lo[r][t] = hi[r][t] = _mm256_setzero_ps();
    alignas(32) uint8_t wtail[NR][kLanes * 4] = {};
    alignas(32) float xtail[NT][kLanes] = {};
    const int64_t whole = cols / kLanes * kLanes;
    if (whole < cols) {
      for (int r = 0; r < NR; ++r) {
        std::memcpy(wtail[r], w + r * row_bytes + whole * Loader::kBytes, (cols - whole) * Loader::kBytes);
      }
      for (int t = 0; t < NT; ++t) {
        std::memcpy(xtail[t], reinterpret_cast<const float*>(x + t * x_stride) + whole, (cols - whole) * sizeof(float));
      }
    }
    auto w_chunk = [&](int64_t k) { return [=](int r) { return w + r * row_bytes + k * Loader::kBytes; }; };
    auto x_chunk = [&](int64_t k) {
      return [=](int t) { return reinterpret_cast<const float*>(x + t * x_stride) + k; };
    };
    auto w_tail = [&](int r) { return static_cast<const uint8_t*>(wtail[r]); };
    auto x_tail = [&](int t) { return static_cast<const float*>(xtail[t]); };
    if constexpr (NT == 1) {
      // One token (decode: the weights stream from memory once): both halves of each chunk in one pass,
      // two accumulators per output. The activations are read per row, as the FMAs' memory operands:
      // hoisting them into registers took the 4 x 3 + 4 x 1 F32 tiles from 85-89 to 60-77 GFLOP/s.
      auto both = [&](auto w_at, auto x_at) {
        for (int r = 0; r < NR; ++r) {
          const __m256 wlo = Loader::Load(w_at(r)), whi = Loader::Load(w_at(r) + 8 * Loader::kBytes);
          lo[r][0] = _mm256_fmadd_ps(wlo, _mm256_loadu_ps(x_at(0)), lo[r][0]);
          hi[r][0] = _mm256_fmadd_ps(whi, _mm256_loadu_ps(x_at(0) + 8), hi[r][0]);
        }
      };
      const TilePrefetch<256 * Loader::kBytes, NR, false> prefetch(w, row_bytes);
      for (int64_t k = 0; k < whole; k += kLanes) {
        prefetch.At(k);
        both(w_chunk(k), x_chunk(k));
      }
      if (whole < cols) both(w_tail, x_tail);
    } else {
      // Several tokens: the halves never meet before the fold, so each takes its own pass over the columns
      // with one accumulator per output, acc: lo (h = 0) or hi (h = 1). The second pass finds the rows in
      // cache; the row block is reused by every token tile, so no software prefetch.
      auto one_half = [&](__m256 (&acc)[NR][NT], int h, auto w_at, auto x_at) {
        __m256 xv[NT];
        for (int t = 0; t < NT; ++t) xv[t] = _mm256_loadu_ps(x_at(t) + 8 * h);
        for (int r = 0; r < NR; ++r) {
          const __m256 wv = Loader::Load(w_at(r) + 8 * h * Loader::kBytes);
          for (int t = 0; t < NT; ++t) acc[r][t] = _mm256_fmadd_ps(wv, xv[t], acc[r][t]);
        }
      };
      // Inlined at both calls, so that acc names registers, not memory chosen at run time.
      auto pass = [&](__m256 (&acc)[NR][NT], int h) __attribute__((always_inline)) {
        for (int64_t k = 0; k < whole; k += kLanes) one_half(acc, h, w_chunk(k), x_chunk(k));
        if (whole < cols) one_half(acc, h, w_tail, x_tail);
      };
      pass(lo, 0);
      pass(hi, 1);
    }
    for (int t = 0; t < NT; ++t)
      for (int r = 0; r < NR; ++r) y[t * y_stride + r] = Fold16(lo[r][t], hi[r][t]);
  }
}

// One row's 16 lanes for FloatRowStream: columns k..k+7 of each chunk in lo, k+8..k+15 in hi (FloatTile's
// halves); a tail chunk through zero-padded copies.
template <class Loader>
struct RowChains {
  __m256 lo = _mm256_setzero_ps(), hi = _mm256_setzero_ps();
  void Chunk(const uint8_t* wk, const float* xk) {
    lo = _mm256_fmadd_ps(Loader::Load(wk), _mm256_loadu_ps(xk), lo);
    hi = _mm256_fmadd_ps(Loader::Load(wk + 8 * Loader::kBytes), _mm256_loadu_ps(xk + 8), hi);
  }
  void Add(const uint8_t* row, int64_t k, const float* xt) { Chunk(row + k * Loader::kBytes, xt + k); }
  void AddTail(const uint8_t* row, int64_t k, int64_t cols, const float* xt) {
    alignas(32) uint8_t wtail[kLanes * 4] = {};
    alignas(32) float xtail[kLanes] = {};
    std::memcpy(wtail, row + k * Loader::kBytes, (cols - k) * Loader::kBytes);
    std::memcpy(xtail, xt + k, (cols - k) * sizeof(float));
    Chunk(wtail, xtail);
  }
  float Fold() const { return Fold16(lo, hi); }
};
#else
// Portable: the canonical order itself, 16 scalar lanes per output.
struct LoadF32 {
  static float Load(const uint8_t* row, int64_t k) {
    float v;
    std::memcpy(&v, row + 4 * k, 4);
    return v;
  }
};
struct LoadF16 {
  static float Load(const uint8_t* row, int64_t k) {
    uint16_t h;
    std::memcpy(&h, row + 2 * k, 2);
    return Fp16ToF32(h);
  }
};
struct LoadBF16 {
  static float Load(const uint8_t* row, int64_t k) {
    uint16_t h;
    std::memcpy(&h, row + 2 * k, 2);
    return Bf16ToF32(h);
  }
};

template <class Loader, int NR, int NT>
void FloatTile(const uint8_t* w, int64_t row_bytes, const uint8_t* x, int64_t x_stride, int64_t cols, float* y,
               int64_t y_stride) {
  for (int t = 0; t < NT; ++t) {
    const auto* xt = reinterpret_cast<const float*>(x + t * x_stride);
    for (int r = 0; r < NR; ++r) {
      const uint8_t* row = w + r * row_bytes;
      float acc[kLanes] = {};
      for (int64_t c = 0; c < cols; c += kLanes) {
        for (int64_t l = 0; l < kLanes; ++l) {
          const int64_t k = c + l;
          acc[l] = k < cols ? std::fma(Loader::Load(row, k), xt[k], acc[l]) : std::fma(0.0f, 0.0f, acc[l]);
        }
      }
      y[t * y_stride + r] = Fold16(acc);
    }
  }
}
#endif

#if TPSERVE_FIXED_POINT_AVX2
// One token (decode): the rows one at a time, FloatTile<Loader, 1, 1>'s arithmetic, as one sequential stream
// through memory that asks for the line kPrefetchAheadBytes bytes on (the next rows' where this one ends). One fma
// chain per row is enough beside memory (4 cycles per 16 weights), and one stream goes faster than the four
// of the 4-row tiles: one thread, weights in 2 MiB pages cycled from memory, us per call, 4-row tiles ->
// this (AVX-512): F16 576 x 1536 125-134 -> 110, 1536 x 576 144-207 -> 103, 2048 x 8192 2814-2880 -> 2014 (110 %
// of the one-core triad); the engine's SmolLM2 decode at one thread F32 25.2 -> 28.0 tok/s, F16 45.6-48.2 ->
// 48.3-49.3; at two threads F32 45.7-48.0 -> 51.3-52.1, F16 unchanged. The AVX2 level on the same host, one
// thread: F32 20.1-20.7 -> 23.0-23.3, F16 38.3-39.6 -> 40.0-40.7.
template <class Loader>
int64_t FloatRowStream(const uint8_t* w, int64_t row_bytes, int64_t num_rows, const uint8_t* x, int64_t, int64_t,
                       int64_t cols, float* y, int64_t) {
  const auto* xt = reinterpret_cast<const float*>(x);
  const int64_t whole = cols / kLanes * kLanes;
  for (int64_t r = 0; r < num_rows; ++r) {
    const uint8_t* row = w + r * row_bytes;
    RowChains<Loader> chains;
    for (int64_t k = 0; k < whole; k += kLanes) {
      const int64_t at = k * Loader::kBytes;
      if (at % 64 == 0) PrefetchLine(reinterpret_cast<const char*>(row) + at + kPrefetchAheadBytes);
      chains.Add(row, k, xt);
    }
    if (whole < cols) chains.AddTail(row, whole, cols, xt);
    y[r] = chains.Fold();
  }
  return num_rows;
}
#endif

// Fixed point: 16-column chunks. Output (t, r)'s chunk at c is the f32 fma chain s = w[c] · x[c],
// s = fma(w[c + i], x[c + i], s) for i = 1..15, and RNE(s · 2^32) its integer; a tail chunk is zero-padded
// (its padding fmas leave s's value). A chain is one register per output whichever way the rows and
// tokens lie, so the SIMD levels run every token count through the panels, rows in lanes
// (float_panel.h); the portable level runs it in scalars. (Measured against 32-column chunks, 576 x
// 1536 F16 at T=128: 63 GFLOP/s against 83 with the earlier tree per chunk; but those would split
// attn_output only every 2 heads of 16, refusing TP 3 and 4 on 4-head toy models.)
#if TPSERVE_FIXED_POINT_AVX2
template <class Loader>
TileTable<int64_t> MakeFixedPointTable() {
  TileTable<int64_t> table{{}, FixedPointFloatPanel<Loader>, nullptr, 1, kFixedPanelRows};
#if TPSERVE_MATMUL_AVX512
  table.rows = FixedRowStream<Loader::kType>;  // decode: one stream through the rows
  table.rows_max_tokens = kFixedStreamMaxTokens;
  table.panel_min_tokens = kFixedStreamMaxTokens + 1;
#endif
  return table;
}
using Lane8F32 = Load8F32;
using Lane8F16 = Load8F16;
using Lane8BF16 = Load8BF16;
#else
constexpr int64_t kFixedChunk = 16;

template <class Loader, int NR, int NT>
void FixedPointFloatTile(const uint8_t* w, int64_t row_bytes, const uint8_t* x, int64_t x_stride, int64_t cols,
                         int64_t* y, int64_t y_stride) {
  for (int t = 0; t < NT; ++t) {
    const auto* xt = reinterpret_cast<const float*>(x + t * x_stride);
    for (int r = 0; r < NR; ++r) {
      const uint8_t* row = w + r * row_bytes;
      int64_t acc = 0;
      for (int64_t c = 0; c < cols; c += kFixedChunk) {
        float s = Loader::Load(row, c) * xt[c];
        for (int64_t k = c + 1; k < std::min(cols, c + kFixedChunk); ++k) s = std::fma(Loader::Load(row, k), xt[k], s);
        acc = WrapAdd(acc, ToFixed(s * kFixedPointScale));
      }
      y[t * y_stride + r] = acc;
    }
  }
}

template <class Loader>
TileTable<int64_t> MakeFixedPointTable() {
  return TileTable<int64_t>{{
      {FixedPointFloatTile<Loader, 1, 1>, FixedPointFloatTile<Loader, 1, 2>, FixedPointFloatTile<Loader, 1, 3>,
       FixedPointFloatTile<Loader, 1, 4>},
      {FixedPointFloatTile<Loader, 2, 1>, FixedPointFloatTile<Loader, 2, 2>, FixedPointFloatTile<Loader, 2, 3>,
       FixedPointFloatTile<Loader, 2, 4>},
      {FixedPointFloatTile<Loader, 4, 1>, FixedPointFloatTile<Loader, 4, 2>, FixedPointFloatTile<Loader, 4, 3>,
       FixedPointFloatTile<Loader, 4, 4>},
  }};
}
using Lane8F32 = LoadF32;
using Lane8F16 = LoadF16;
using Lane8BF16 = LoadBF16;
#endif

// Loader feeds the tiles, PanelLoader the panels' packing (8 weights at a time).
template <class Loader, class PanelLoader>
TileTable<float> MakeTable() {
#if TPSERVE_FIXED_POINT_AVX2
  constexpr RowsFn<float> kRows = FloatRowStream<Loader>;
#else
  constexpr RowsFn<float> kRows = nullptr;
#endif
#if TPSERVE_FIXED_POINT_AVX2
  constexpr PanelFn<float> kPanel = FloatPanel<PanelLoader>;
  constexpr int kPanelRowsOfFloat = kFloatPanelRows;
#else
  constexpr PanelFn<float> kPanel = nullptr;
  constexpr int kPanelRowsOfFloat = kPanelRows;
#endif
  return TileTable<float>{{
      {FloatTile<Loader, 1, 1>, FloatTile<Loader, 1, 2>, FloatTile<Loader, 1, 3>, FloatTile<Loader, 1, 4>},
      {FloatTile<Loader, 2, 1>, FloatTile<Loader, 2, 2>, FloatTile<Loader, 2, 3>, FloatTile<Loader, 2, 4>},
      {FloatTile<Loader, 4, 1>, FloatTile<Loader, 4, 2>, FloatTile<Loader, 4, 3>, FloatTile<Loader, 4, 4>},
  }, kPanel, kRows, kFloatPanelMinTokens, kPanelRowsOfFloat};
}

// BF16's tables: on the avx512bf16 level its panels take VDPBF16PS (bf16_pair_panel.h).
TileTable<float> MakeBf16Table() {
  TileTable<float> table = MakeTable<LoadBF16, Lane8BF16>();
#if TPSERVE_MATMUL_AVX512 && defined(__AVX512BF16__)
  table.panel = FloatPairPanel;
  table.panel_prepare = PrepareFloatPairs;
  table.panel_min_tokens = kPairPanelMinTokens;
#endif
  return table;
}
TileTable<int64_t> MakeBf16FixedPointTable() {
  TileTable<int64_t> table = MakeFixedPointTable<Lane8BF16>();
#if TPSERVE_MATMUL_AVX512 && defined(__AVX512BF16__)
  table.panel = FixedPairPanel;
  table.panel_prepare = PrepareFixedPairs;
#endif
  return table;
}

}  // namespace

const TileTable<float>& FloatTiles(DType type) {
  static const TileTable<float> kF32 = MakeTable<LoadF32, Lane8F32>();
  static const TileTable<float> kF16 = MakeTable<LoadF16, Lane8F16>();
  static const TileTable<float> kBF16 = MakeBf16Table();
  switch (type) {
    case DType::kF32: return kF32;
    case DType::kF16: return kF16;
    case DType::kBF16: return kBF16;
    default: break;
  }
  std::abort();  // unreachable: MatMul and MatMulFixedPoint check the type
  return kF32;
}

const TileTable<int64_t>& FixedPointFloatTiles(DType type) {
  static const TileTable<int64_t> kF32 = MakeFixedPointTable<Lane8F32>();
  static const TileTable<int64_t> kF16 = MakeFixedPointTable<Lane8F16>();
  static const TileTable<int64_t> kBF16 = MakeBf16FixedPointTable();
  switch (type) {
    case DType::kF32: return kF32;
    case DType::kF16: return kF16;
    case DType::kBF16: return kBF16;
    default: break;
  }
  std::abort();  // unreachable: MatMul and MatMulFixedPoint check the type
  return kF32;
}

}  // namespace tpserve::internal::TPSERVE_ISA_NS
