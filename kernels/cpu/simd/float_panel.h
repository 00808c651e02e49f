// Internal to matmul_float.cc (AVX2 and up): the float weights' panels, MatMul's path from
// kFloatPanelMinTokens tokens and MatMulFixedPoint's for every token count. A panel of kFloatPanelRows rows
// (16 on AVX2, 48 on AVX-512: a FloatRows; kFixedPanelRows, 16 and 32, for the fixed-point panel: a
// FixedRows; panel_rows_avx2.h and panel_rows_avx512.h) is converted once
// per call to f32 with the rows in lanes: for each 16-column chunk and each column of it, the panel's rows'
// weights side by side (rows past the panel and columns past `cols` are zero). A token's activation is
// broadcast to all the rows, so one weight load feeds as many tokens as the registers hold (an outer
// product), where the tiles' dot products take a weight load per row and two FMAs per token pair.
//
// Both keep their definitions' order of operations exactly (matmul_float.cc):
// - FloatPanel: an output's 16 lanes (lane l: columns l, l + 16, l + 32, ...) are 16 fma chains from +0;
//   the panel runs kFloatPanelLanes lanes at a time for kFloatPanelTokens tokens × the panel's rows, keeps
//   the lanes in a scratch between column blocks, and folds them at the end by Fold16's tree on vectors of
//   the rows.
// - FixedPointFloatPanel: per chunk and output one fma chain over the chunk's columns, RNE(S · 2^32) added
//   in int64, kFixedPanelTokens tokens × the panel's rows at a time; below kFixedPackMinTokens tokens it
//   reads the rows in place, 16 at a time (AVX2; AVX-512 decodes through fixed_row_stream_avx512.h).
// A zero-padded last chunk reads zero-padded copies of the tokens' last activations: its padding
// operations (fma(0, 0, lane): -0 becomes +0) are done as the tiles do them.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>
#include <vector>

#include "kernels/cpu/matmul_tile.h"
#include "kernels/cpu/simd/fixed_point_lanes.h"
#include "kernels/cpu/simd/intrinsics.h"
#include "kernels/cpu/simd/tile_prefetch.h"
#include "kernels/cpu/simd/transpose_avx2.h"
#if defined(__AVX512F__) && defined(__AVX512DQ__)
#include "kernels/cpu/simd/panel_rows_avx512.h"
#else
#include "kernels/cpu/simd/panel_rows_avx2.h"
#endif

namespace tpserve::internal::TPSERVE_ISA_NS {

constexpr int64_t kPanelChunk = 16;  // columns per chunk: the canonical lane count

// A packed panel: column l of chunk j (the panel's column 16j + l) holds the panel's rows' weights side by
// side. FloatPanel packs lane-major (lane l's columns of all chunks consecutive: one lane's pass reads a
// contiguous run, where chunk-major would read one line per kilobyte, which maps onto 4 of the L1 cache's
// 64 sets), FixedPointFloatPanel chunk-major (each chunk one contiguous block).
template <int kRows>
struct alignas(64) PackedColumn {
  float r[kRows];
};
template <bool kLaneMajor, int kRows>
struct PackedPanel {
  PackedColumn<kRows>* columns;
  int64_t chunks;
  float* At(int l, int64_t j) const { return columns[kLaneMajor ? l * chunks + j : j * kPanelChunk + l].r; }
};

// Packs rows [0, num_rows) of w into packed's 16 · ceil(cols / 16) columns; Loader reads 8 weights as f32.
template <class Loader, bool kLaneMajor, int kRows>
void PackFloatPanel(const uint8_t* w, int64_t row_bytes, int num_rows, int64_t cols,
                    PackedPanel<kLaneMajor, kRows>& packed) {
  const int64_t whole = cols / kPanelChunk, chunks = (cols + kPanelChunk - 1) / kPanelChunk;
  alignas(32) uint8_t tail[kRows][kPanelChunk * 4];  // the zero-padded last chunk, if cols has one
  if (whole < chunks) {
    std::memset(tail, 0, sizeof tail);
    for (int r = 0; r < num_rows; ++r) {
      std::memcpy(tail[r], w + r * row_bytes + whole * kPanelChunk * Loader::kBytes,
                  (cols - whole * kPanelChunk) * Loader::kBytes);
    }
  }
  for (int64_t j = 0; j < chunks; ++j) {
    for (int h = 0; h < kRows / 8; ++h) {  // rows 8h..8h+7
      for (int q = 0; q < 2; ++q) {             // columns 8q..8q+7 of the chunk
        __m256i v[8];
        for (int i = 0; i < 8; ++i) {
          const int r = 8 * h + i;
          if (r >= num_rows) {
            v[i] = _mm256_setzero_si256();
            continue;
          }
          const uint8_t* src = j < whole ? w + r * row_bytes + (j * kPanelChunk + 8 * q) * Loader::kBytes
                                         : tail[r] + 8 * q * Loader::kBytes;
          v[i] = _mm256_castps_si256(Loader::Load(src));
        }
        Transpose8x8(v);  // v[c]: column 8q + c of rows 8h..8h+7
        for (int c = 0; c < 8; ++c) {
          _mm256_store_si256(reinterpret_cast<__m256i*>(packed.At(8 * q + c, j) + 8 * h), v[c]);
        }
      }
    }
  }
}

// The packed panel of this thread's current call (its scratch reused across calls).
template <class Loader, bool kLaneMajor, int kRows>
PackedPanel<kLaneMajor, kRows> PackPanel(const uint8_t* w, int64_t row_bytes, int num_rows, int64_t cols) {
  thread_local std::vector<PackedColumn<kRows>> scratch;
  const int64_t chunks = (cols + kPanelChunk - 1) / kPanelChunk;
  if (static_cast<int64_t>(scratch.size()) < kPanelChunk * chunks) scratch.resize(kPanelChunk * chunks);
  PackedPanel<kLaneMajor, kRows> packed{scratch.data(), chunks};
  PackFloatPanel<Loader>(w, row_bytes, num_rows, cols, packed);
  return packed;
}

// NT tokens' activation rows (xt) and their zero-padded last partial chunk (tail), if cols has one.
template <int NT>
struct TokenRows {
  const float* xt[NT];
  alignas(32) float tail[NT][kPanelChunk];  // written only where cols has a partial chunk
  int64_t whole;  // the number of whole chunks

  TokenRows(const uint8_t* x, int64_t x_stride, int64_t cols) : whole(cols / kPanelChunk) {
    const int64_t rest = cols - whole * kPanelChunk;
    for (int t = 0; t < NT; ++t) {
      xt[t] = reinterpret_cast<const float*>(x + t * x_stride);
      if (rest == 0) continue;  // (zeroing the tails every call took 4 % of the float panel's time)
      std::memcpy(tail[t], xt[t] + whole * kPanelChunk, rest * sizeof(float));
      std::memset(tail[t] + rest, 0, (kPanelChunk - rest) * sizeof(float));
    }
  }
};

// {make(1), ..., make(N)}, make taking std::integral_constant<int, n>: the passes of every token count.
template <int N, class Make>
constexpr auto ByTokenCount(Make make) {
  return [&]<int... I>(std::integer_sequence<int, I...>) {
    return std::array{make(std::integral_constant<int, I + 1>{})...};
  }(std::make_integer_sequence<int, N>{});
}

// ---- FloatPanel ----

constexpr int64_t kFloatBlockChunks = 48;  // 768 columns: the tokens' activations stay in L1 over 16 lanes

// y[t * y_stride + r] for r < num_rows from the 16 lanes of NT tokens' outputs (lanes[l][t][r]): Fold16 on the
// panel's rows at once, b[i] = a[i] + a[i + 8]; s[i] = b[i] + b[i + 4]; (s0 + s2) + (s1 + s3).
template <int NT>
void FoldPanelLanes(const float (&lanes)[kPanelChunk][NT][kFloatPanelRows], int num_rows, float* y, int64_t y_stride) {
  for (int t = 0; t < NT; ++t) {
    auto lane = [&](int l) { return FloatRows::Load(lanes[l][t]); };
    FloatRows b[8], s[4];
    for (int i = 0; i < 8; ++i) b[i] = lane(i) + lane(i + 8);
    for (int i = 0; i < 4; ++i) s[i] = b[i] + b[i + 4];
    ((s[0] + s[2]) + (s[1] + s[3])).StoreFirst(y + t * y_stride, num_rows);
  }
}

// NT tokens against the packed panel: y[t * y_stride + r] for r < num_rows.
template <int NT>
void FloatPanelTokens(const PackedPanel<true, kFloatPanelRows>& packed, int num_rows, const uint8_t* x,
                      int64_t x_stride, int64_t cols, float* y, int64_t y_stride) {
  const int64_t chunks = (cols + kPanelChunk - 1) / kPanelChunk;
  const TokenRows<NT> tokens(x, x_stride, cols);
  const int64_t whole = tokens.whole;
  alignas(64) float lanes[kPanelChunk][NT][kFloatPanelRows];  // lanes[l][t][r]: output (t, r)'s lane l
  for (int64_t j0 = 0; j0 < chunks; j0 += kFloatBlockChunks) {
    const int64_t j1 = std::min(chunks, j0 + kFloatBlockChunks);
    for (int l0 = 0; l0 < kPanelChunk; l0 += kFloatPanelLanes) {  // lanes l0 .. l0 + kFloatPanelLanes - 1
      constexpr int L = kFloatPanelLanes;
      FloatRows acc[L][NT];
      for (int i = 0; i < L; ++i) {
        for (int t = 0; t < NT; ++t) acc[i][t] = j0 == 0 ? FloatRows::Zero() : FloatRows::Load(lanes[l0 + i][t]);
      }
      const float* lane = packed.At(l0, 0);  // lane-major: lane l0 + i's chunk j at lane + (i · chunks + j) · rows
      auto step = [&](int64_t j, auto x_at) __attribute__((always_inline)) {
        for (int i = 0; i < L; ++i) {
          const FloatRows w = FloatRows::Load(lane + (i * chunks + j) * kFloatPanelRows);
          for (int t = 0; t < NT; ++t) acc[i][t] = Fma(w, x_at(t) + i, acc[i][t]);
        }
      };
      const int64_t jw = std::min(j1, whole);
      for (int64_t j = j0; j < jw; ++j) step(j, [&](int t) { return tokens.xt[t] + j * kPanelChunk + l0; });
      if (jw < j1) step(whole, [&](int t) { return tokens.tail[t] + l0; });  // the zero-padded last chunk
      for (int i = 0; i < L; ++i) {
        for (int t = 0; t < NT; ++t) acc[i][t].Store(lanes[l0 + i][t]);
      }
    }
  }
  FoldPanelLanes(lanes, num_rows, y, y_stride);
}

template <class Loader>
void FloatPanel(const uint8_t* w, int64_t row_bytes, int num_rows, const uint8_t* x, int64_t x_stride,
                int64_t num_tokens, int64_t cols, float* y, int64_t y_stride) {
  const PackedPanel<true, kFloatPanelRows> packed =
      PackPanel<Loader, true, kFloatPanelRows>(w, row_bytes, num_rows, cols);
  static constexpr auto kTokens =
      ByTokenCount<kFloatPanelTokens - 1>([](auto nt) { return &FloatPanelTokens<decltype(nt)::value>; });
  const int64_t passes = (num_tokens + kFloatPanelTokens - 1) / kFloatPanelTokens;
  auto prefetch = [&](int64_t t) {  // the next panel's rows, a slice per pass (tile_prefetch.h)
    PrefetchPanelSlice(w + kFloatPanelRows * row_bytes, kFloatPanelRows * row_bytes, t / kFloatPanelTokens, passes);
  };
  int64_t t = 0;
  for (; t + kFloatPanelTokens <= num_tokens; t += kFloatPanelTokens) {
    prefetch(t);
    FloatPanelTokens<kFloatPanelTokens>(packed, num_rows, x + t * x_stride, x_stride, cols, y + t * y_stride,
                                        y_stride);
  }
  if (t < num_tokens) {
    prefetch(t);
    kTokens[num_tokens - t - 1](packed, num_rows, x + t * x_stride, x_stride, cols, y + t * y_stride, y_stride);
  }
}

// ---- FixedPointFloatPanel ----

constexpr int64_t kFixedPackMinTokens = 4;  // fewer read the rows in place (FixedDirectTokens)
#if defined(__AVX512F__) && defined(__AVX512DQ__)
inline constexpr bool kFixedDirect = false;  // fewer tokens take FixedRowStream (fixed_row_stream_avx512.h)
#else
inline constexpr bool kFixedDirect = true;
#endif
// FixedDirectTokens asks for the next group's 16 rows of 16-bit weights while it reads a group (a slice per
// chunk, into L2) where a group is at most this. One thread, F16, weights cycled out of the cache, us per call
// without -> with (rows x cols): SmolLM2's 1536 x 576 (a group 18 KB) 280-291 -> 195-213, 576 x 1536 (48 KB)
// 207-213 -> 184-196; the 1B model's 8192 x 2048 (64 KB) 3098-3232 -> 3736-4005, so longer rows are left to the
// hardware prefetcher. prefetcht0, or two groups ahead, did no better. F32 rows, whose chunks take a whole line,
// ran slower with it (1536 x 576: 404 -> 462-486 us).
constexpr int64_t kDirectPrefetchBytes = 48 << 10;

// NT tokens' sums over every chunk: sums[t][r] += RNE(S · 2^32) + kFixedTermBias per chunk, S the chunk's
// fma chain for row r (one register per output: s = w[c] · x[c], then s = fma(w[c + i], x[c + i], s)).
template <int NT>
void FixedPanelTokens(const PackedPanel<false, kFixedPanelRows>& packed, const uint8_t* x, int64_t x_stride,
                      int64_t cols, int64_t (*sums)[kFixedPanelRows]) {
  const int64_t chunks = (cols + kPanelChunk - 1) / kPanelChunk;
  const TokenRows<NT> tokens(x, x_stride, cols);
  PanelSums acc[NT];  // the level's (panel_rows_*.h): in registers or straight to sums
  auto chunk = [&](int64_t j, auto x_at) __attribute__((always_inline)) {
    FixedRows s[NT];
    const FixedRows w0 = FixedRows::Load(packed.At(0, j));
    for (int t = 0; t < NT; ++t) s[t] = Mul(w0, x_at(t));
#pragma GCC unroll 15
    for (int c = 1; c < kPanelChunk; ++c) {
      const FixedRows w = FixedRows::Load(packed.At(c, j));
      for (int t = 0; t < NT; ++t) s[t] = Fma(w, x_at(t) + c, s[t]);
    }
    for (int t = 0; t < NT; ++t) acc[t].Add(s[t], sums[t]);
  };
  for (int64_t j = 0; j < tokens.whole; ++j) chunk(j, [&](int t) { return tokens.xt[t] + j * kPanelChunk; });
  if (tokens.whole < chunks) chunk(tokens.whole, [&](int t) { return static_cast<const float*>(tokens.tail[t]); });
  for (int t = 0; t < NT; ++t) acc[t].Finish(sums[t]);
}

// Fewer tokens than repay the packing (decode): NT tokens against the panel's rows read in place, 16 at a
// time, each chunk's 8 × 8 blocks transposed in registers; the same chains as FixedPanelTokens, the two
// row octets' side by side. Rows past num_rows repeat the last row (their sums are never read). AVX2 only: on
// AVX-512 every float type decodes through FixedRowStream (kFixedDirect).
template <class Loader, int NT>
void FixedDirectTokens(const uint8_t* w, int64_t row_bytes, int num_rows, const uint8_t* x, int64_t x_stride,
                       int64_t cols, int64_t (*sums)[kFixedPanelRows]) {
  const TokenRows<NT> tokens(x, x_stride, cols);
  const uint8_t* rows[kFixedPanelRows];
  for (int i = 0; i < kFixedPanelRows; ++i) rows[i] = w + std::min(i, num_rows - 1) * row_bytes;
  auto chunk = [&](int g, auto w_at, auto x_at) __attribute__((always_inline)) {  // rows 16g..16g+15
    __m256 s[2][NT];  // the chains of rows 0..7 and 8..15, apart until the chunk's terms
    for (int q = 0; q < 2; ++q) {  // columns 8q..8q+7 of the chunk
      __m256i v[2][8];
      for (int h = 0; h < 2; ++h) {
        for (int i = 0; i < 8; ++i) {
          v[h][i] = _mm256_castps_si256(Loader::Load(w_at(16 * g + 8 * h + i) + 8 * q * Loader::kBytes));
        }
        Transpose8x8(v[h]);  // v[h][c]: column 8q + c of rows 8h..8h+7
      }
      for (int c = 0; c < 8; ++c) {
        for (int t = 0; t < NT; ++t) {
          const __m256 xv = _mm256_broadcast_ss(x_at(t) + 8 * q + c);
          for (int h = 0; h < 2; ++h) {
            const __m256 wc = _mm256_castsi256_ps(v[h][c]);
            s[h][t] = q == 0 && c == 0 ? _mm256_mul_ps(wc, xv) : _mm256_fmadd_ps(wc, xv, s[h][t]);
          }
        }
      }
    }
    for (int t = 0; t < NT; ++t) AddFixedTerms16(s[0][t], s[1][t], sums[t] + 16 * g);
  };
  const int64_t whole = tokens.whole;
  const bool prefetch = Loader::kBytes == 2 && 16 * row_bytes <= kDirectPrefetchBytes;
  for (int g = 0; g < (num_rows + 15) / 16; ++g) {  // one group's 16 row streams at a time
    // The next group's rows, a slice per pass (tile_prefetch.h), where they fit beside this group's in L2.
    const uint8_t* next = w + (16 * g + 16) * row_bytes;
    for (int64_t j = 0; j < whole; ++j) {
      if (prefetch) PrefetchPanelSlice(next, 16 * row_bytes, j, whole);
      chunk(g, [&](int i) { return rows[i] + j * kPanelChunk * Loader::kBytes; },
            [&](int t) { return tokens.xt[t] + j * kPanelChunk; });
    }
    if (whole * kPanelChunk < cols) {
      alignas(32) uint8_t tail[kFixedPanelRows][kPanelChunk * 4] = {};
      for (int i = 16 * g; i < 16 * g + 16; ++i) {
        std::memcpy(tail[i], rows[i] + whole * kPanelChunk * Loader::kBytes,
                    (cols - whole * kPanelChunk) * Loader::kBytes);
      }
      chunk(g, [&](int i) { return static_cast<const uint8_t*>(tail[i]); },
            [&](int t) { return static_cast<const float*>(tokens.tail[t]); });
    }
  }
}

template <class Loader>
void FixedPointFloatPanel(const uint8_t* w, int64_t row_bytes, int num_rows, const uint8_t* x, int64_t x_stride,
                          int64_t num_tokens, int64_t cols, int64_t* y, int64_t y_stride) {
  static constexpr auto kTokens =
      ByTokenCount<kFixedPanelTokens>([](auto nt) { return &FixedPanelTokens<decltype(nt)::value>; });
  const bool direct = kFixedDirect && num_tokens < kFixedPackMinTokens;
  PackedPanel<false, kFixedPanelRows> packed{};
  if (!direct) packed = PackPanel<Loader, false, kFixedPanelRows>(w, row_bytes, num_rows, cols);
  // Every term carried one kFixedTermBias.
  const uint64_t bias = kFixedTermBias * static_cast<uint64_t>((cols + kPanelChunk - 1) / kPanelChunk);
  const int64_t passes = (num_tokens + kFixedPanelTokens - 1) / kFixedPanelTokens;
  for (int64_t t = 0; t < num_tokens; t += kFixedPanelTokens) {
    if (!direct) {  // the next panel's rows, a slice per pass (tile_prefetch.h)
      PrefetchPanelSlice(w + kFixedPanelRows * row_bytes, kFixedPanelRows * row_bytes, t / kFixedPanelTokens, passes);
    }
    const int nt = static_cast<int>(std::min<int64_t>(kFixedPanelTokens, num_tokens - t));
    alignas(32) int64_t sums[kFixedPanelTokens][kFixedPanelRows];
    for (int i = 0; i < nt; ++i) {  // vector stores: `= {}` became a rep stos, slow to start on short runs
      for (int r = 0; r < kFixedPanelRows; r += 4) {
        _mm256_store_si256(reinterpret_cast<__m256i*>(sums[i] + r), _mm256_setzero_si256());
      }
    }
    if (direct) {
      if constexpr (kFixedDirect) {
        static constexpr auto kDirect = ByTokenCount<kFixedPackMinTokens - 1>(
            [](auto n) { return &FixedDirectTokens<Loader, decltype(n)::value>; });
        kDirect[nt - 1](w, row_bytes, num_rows, x + t * x_stride, x_stride, cols, sums);
      }
    } else {
      kTokens[nt - 1](packed, x + t * x_stride, x_stride, cols, sums);
    }
    for (int i = 0; i < nt; ++i) {
      for (int r = 0; r < num_rows; ++r) y[(t + i) * y_stride + r] = WrapAdd(sums[i][r], static_cast<int64_t>(-bias));
    }
  }
}

}  // namespace tpserve::internal::TPSERVE_ISA_NS
