#include "kernels/cpu/matmul.h"

#include <algorithm>
#include <type_traits>
#include <vector>

#include "common/check.h"
#include "kernels/cpu/isa_kernels.h"
#include "kernels/cpu/matmul_tile.h"
#include "kernels/cpu/quantize_activations.h"

namespace tpserve {
namespace internal {

namespace {
constexpr int64_t kRowBlock = 16;  // weight rows kept hot while every token tile passes over them
constexpr int kMaxTileTokens = 4;

int RowIndex(int64_t n) { return n >= 4 ? 2 : n >= 2 ? 1 : 0; }
int RowCount(int index) { return index == 2 ? 4 : index == 1 ? 2 : 1; }
}  // namespace

template <class Out>
void RunTiles(const TileTable<Out>& table, const uint8_t* w, int64_t row_bytes, int64_t row_begin, int64_t row_end,
              const uint8_t* x, int64_t x_stride, int64_t num_tokens, int64_t cols, Out* y, int64_t y_stride,
              bool single_row) {
  // Decode (one tile of tokens): stream the rows once. Prefill: block the rows so each block is
  // read from memory once and reused by every token tile.
  const int64_t row_block = num_tokens <= kMaxTileTokens ? row_end - row_begin : kRowBlock;
  for (int64_t rb = row_begin; rb < row_end; rb += row_block) {
    const int64_t rb_end = std::min(row_end, rb + row_block);
    for (int64_t t = 0; t < num_tokens; t += kMaxTileTokens) {
      const int nt = static_cast<int>(std::min<int64_t>(kMaxTileTokens, num_tokens - t));
      // Up to 4 rows x 4 tokens: 16 accumulators, 8 loads per 16 FMAs.
      for (int64_t r = rb; r < rb_end;) {
        const int ri = single_row ? 0 : RowIndex(rb_end - r);
        const int nr = RowCount(ri);
        table.fn[ri][nt - 1](w + r * row_bytes, row_bytes, x + t * x_stride, x_stride, cols, y + t * y_stride + r,
                             y_stride);
        r += nr;
      }
    }
  }
}

template <class Out>
void RunMatMul(const TileTable<Out>& table, const WeightMatrix& w, const float* x, int64_t num_tokens, Out* y,
               ThreadPool* pool) {
  CHECK(pool != nullptr);
  CHECK_GE(num_tokens, 0);
  if (num_tokens == 0 || w.rows == 0) return;
  const int64_t row_bytes = DTypeRowBytes(w.type, w.cols);
  const auto* wdata = static_cast<const uint8_t*>(w.data);

  const uint8_t* xdata;
  int64_t x_stride;
  thread_local std::vector<BlockQ8Act> act;  // [T, cols / 32] scratch, reused across calls
  if (IsQuantized(w.type)) {
    const int64_t blocks = w.cols / kQuantBlock;
    if (static_cast<int64_t>(act.size()) < num_tokens * blocks) act.resize(num_tokens * blocks);
    BlockQ8Act* a = act.data();
    pool->ParallelFor(num_tokens, [&](int64_t begin, int64_t end) {
      for (int64_t t = begin; t < end; ++t) QuantizeActivationRow(x + t * w.cols, w.cols, a + t * blocks);
    });
    xdata = reinterpret_cast<const uint8_t*>(a);
    x_stride = blocks * static_cast<int64_t>(sizeof(BlockQ8Act));
  } else {
    xdata = reinterpret_cast<const uint8_t*>(x);
    x_stride = w.cols * static_cast<int64_t>(sizeof(float));
  }
  // One token through Q8_0 weights with float sums: one row at a time, a single sequential stream
  // (tpserve-bench-kernels, 2 threads, 3 rounds: 1.3-1.4x the 4-row tiles; F16 and Q4_K were slower that
  // way, Q4_1 no different). The fixed-point sums keep 4 rows: their per-block reduction packs the rows' totals.
  const bool single_row = num_tokens == 1 && std::is_same_v<Out, float> && w.type == DType::kQ8_0;
  // Each thread owns a contiguous range of weight rows, so it streams a disjoint part of the weight.
  pool->ParallelFor(w.rows, [&](int64_t begin, int64_t end) {
    RunTiles(table, wdata, row_bytes, begin, end, xdata, x_stride, num_tokens, w.cols, y, w.rows, single_row);
  });
}

template void RunTiles<float>(const TileTable<float>&, const uint8_t*, int64_t, int64_t, int64_t, const uint8_t*,
                              int64_t, int64_t, int64_t, float*, int64_t, bool);
template void RunTiles<int64_t>(const TileTable<int64_t>&, const uint8_t*, int64_t, int64_t, int64_t,
                                const uint8_t*, int64_t, int64_t, int64_t, int64_t*, int64_t, bool);
template void RunMatMul<float>(const TileTable<float>&, const WeightMatrix&, const float*, int64_t, float*,
                               ThreadPool*);
template void RunMatMul<int64_t>(const TileTable<int64_t>&, const WeightMatrix&, const float*, int64_t, int64_t*,
                                 ThreadPool*);

}  // namespace internal

void MatMul(const WeightMatrix& w, const float* x, int64_t num_tokens, float* y, ThreadPool* pool) {
  CHECK(IsQuantized(w.type) || w.type == DType::kF32 || w.type == DType::kF16 || w.type == DType::kBF16)
      << "no matmul for " << DTypeName(w.type);
  const internal::IsaKernels& kernels = internal::ActiveKernels();
  const internal::TileTable<float>& table = IsQuantized(w.type) ? kernels.quant_tiles(w.type) : kernels.float_tiles(w.type);
  internal::RunMatMul(table, w, x, num_tokens, y, pool);
}

}  // namespace tpserve
