// Internal to the matmul kernels: the register-blocked tile functions (NR weight rows × NT tokens)
// and the driver that walks a weight-row range over all tokens. The same driver serves the float
// outputs of MatMul and the int64 fixed-point outputs of MatMulFixedPoint.
//
// Batch invariance comes from one rule: each y[t, r] is produced by its own accumulator that sees
// the same sequence of operations in every tile shape, so the tile shape, T and the thread split
// change which values share a loop, never how any one value is summed.
#pragma once

#include <cstdint>
#include <span>

#include "common/dtype.h"
#include "common/thread_pool.h"
#include "kernels/cpu/weight_matrix.h"

namespace tpserve::internal {

// Computes y[t * y_stride + r] for r in [0, NR), t in [0, NT) of one tile.
// w: NR rows of row_bytes each; x: the per-token operand (f32 rows or Q8 activation blocks), with
// x_stride bytes between tokens. Out is float (MatMul) or int64_t (MatMulFixedPoint).
template <class Out>
using TileFn = void (*)(const uint8_t* w, int64_t row_bytes, const uint8_t* x, int64_t x_stride, int64_t cols,
                        Out* y, int64_t y_stride);

// Rows [0, num_rows) of w (num_rows <= the table's panel_rows) against all num_tokens at once, the tiles' results
// bit for bit: the path of kPanelMinTokens tokens or more on the levels that have one. A panel's unpack
// (a transpose per block and 8 rows) pays for itself from about 16 tokens on (SmolLM2 Q4_1 decode steps,
// AVX2, 2 threads, tok/s with panels from 8 / 16 / 32 tokens against tiles: batch 8 283 / 322-337 / 324-329
// against 332-348, batch 16 385-405 / 333-390 / 317-352 against 305-350, batch 32 470-497 / 469-496 /
// 442-459 against 329-347), so smaller batches keep the tiles.
template <class Out>
using PanelFn = void (*)(const uint8_t* w, int64_t row_bytes, int num_rows, const uint8_t* x, int64_t x_stride,
                         int64_t num_tokens, int64_t cols, Out* y, int64_t y_stride);
// The level's per-token operand of its panels, prepared once per RunTiles call from x (the quantised types'
// shifted activations, which every panel of the call then reads): the prepared tokens, in the calling thread's
// scratch, and their stride in *prepared_stride; the panel function takes them as its x.
using PanelPrepareFn = const uint8_t* (*)(const uint8_t* x, int64_t x_stride, int64_t num_tokens, int64_t cols,
                                          int64_t* prepared_stride);
inline constexpr int kPanelRows = 16;
inline constexpr int64_t kPanelMinTokens = 16;
// Float weights' panels (simd/float_panel.h) convert and transpose the rows to f32 first, which 16
// tokens do not repay (SmolLM2 576 x 576 F16, one thread, GFLOP/s panels against tiles: T = 16 39-56
// against 63, T = 32 66 against 64, T = 64 74 against 41-65), nor 32 to 48 on the Zen 5 VM (SmolLM2 decode
// at 2 threads, two interleaved rounds, tok/s panels → tiles: F32 batch 32 559-579 → 679-738, 48 709-728 →
// 709-765; F16 32 749-767 → 750-908, 48 742-844 → 932-991). The avx512bf16 level's BF16 pair panels
// (simd/bf16_pair_panel.h) still lead from 32 (batch 32 1011-1110 against 885-1056 through the tiles).
inline constexpr int64_t kFloatPanelMinTokens = 64;
inline constexpr int64_t kPairPanelMinTokens = 32;

// Rows [0, num_rows) of w against num_tokens (decode: at most the table's rows_max_tokens) tokens, each token's
// activation prepared once for all of them, the tiles' results bit for bit; returns how many rows it did (the
// first ones), the tiles do the rest.
template <class Out>
using RowsFn = int64_t (*)(const uint8_t* w, int64_t row_bytes, int64_t num_rows, const uint8_t* x, int64_t x_stride,
                           int64_t num_tokens, int64_t cols, Out* y, int64_t y_stride);

// Tile functions for every (NR, NT) in {1, 2, 4} × {1, 2, 3, 4}, indexed [nr_index][nt - 1], and the
// level's panel and row functions, or null.
template <class Out>
struct TileTable {
  TileFn<Out> fn[3][4];
  PanelFn<Out> panel = nullptr;
  RowsFn<Out> rows = nullptr;
  int64_t panel_min_tokens = kPanelMinTokens;
  int panel_rows = kPanelRows;  // the most rows one panel call takes
  PanelPrepareFn panel_prepare = nullptr;  // null: the panels read x as it is
  int64_t rows_max_tokens = 1;  // the most tokens the row function takes
};

// Runs rows [row_begin, row_end) against all num_tokens: the table's panels of panel_rows rows for
// its panel_min_tokens tokens or more where it has them; for up to rows_max_tokens tokens its row function,
// where it has one (float weights: one row at a time, simd/matmul_float.cc), then tiles for the rows it
// left; else tiles of up to 4 tokens, row blocks kept hot in cache across token tiles. y: [T, rows] with row stride
// y_stride (= rows). Instantiated for float and int64_t.
template <class Out>
void RunTiles(const TileTable<Out>& table, const uint8_t* w, int64_t row_bytes, int64_t row_begin, int64_t row_end,
              const uint8_t* x, int64_t x_stride, int64_t num_tokens, int64_t cols, Out* y, int64_t y_stride);

// The whole multiply over one or more weights of the same type and cols that read the same x:
// quantises x to Q8 activation blocks when the weights are quantised, then runs the tiles with each
// thread owning a contiguous range of the parts' rows (cut at part boundaries). ys[i]: [T, parts[i].rows].
// Instantiated for float and int64_t.
template <class Out>
void RunMatMul(const TileTable<Out>& table, std::span<const WeightMatrix> parts, const float* x, int64_t num_tokens,
               std::span<Out* const> ys, ThreadPool* pool);

// The tile tables of each instruction-set level: IsaKernels (kernels/cpu/isa_kernels.h).

}  // namespace tpserve::internal
