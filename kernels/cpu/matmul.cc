#include "kernels/cpu/matmul.h"

#include <algorithm>
#include <optional>
#include <span>
#include <vector>

#include "common/check.h"
#include "kernels/cpu/flush_denormals.h"
#include "kernels/cpu/isa_kernels.h"
#include "kernels/cpu/matmul_tile.h"
#include "kernels/cpu/quantize_activations.h"

namespace tpserve {
namespace internal {

namespace {
constexpr int64_t kRowBlock = 16;  // weight rows kept hot while every token tile passes over them
constexpr int kMaxTileTokens = 4;

// out[i] = x[i] rounded to bf16, as f32. Vectorised (F32ToBf16 out of line, per value, took 8 % of SmolLM2
// BF16's prefill).
void RoundToBf16(const float* x, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = Bf16ToF32(F32ToBf16(x[i]));
}

int RowIndex(int64_t n) { return n >= 4 ? 2 : n >= 2 ? 1 : 0; }
int RowCount(int index) { return index == 2 ? 4 : index == 1 ? 2 : 1; }
}  // namespace

template <class Out>
void RunTiles(const TileTable<Out>& table, const uint8_t* w, int64_t row_bytes, int64_t row_begin, int64_t row_end,
              const uint8_t* x, int64_t x_stride, int64_t num_tokens, int64_t cols, Out* y, int64_t y_stride) {
  if (table.panel != nullptr && num_tokens >= table.panel_min_tokens) {
    if (table.panel_prepare != nullptr) x = table.panel_prepare(x, x_stride, num_tokens, cols, &x_stride);
    for (int64_t r = row_begin; r < row_end; r += table.panel_rows) {
      const int num_rows = static_cast<int>(std::min<int64_t>(table.panel_rows, row_end - r));
      table.panel(w + r * row_bytes, row_bytes, num_rows, x, x_stride, num_tokens, cols, y + r, y_stride);
    }
    return;
  }
  if (table.rows != nullptr && num_tokens <= table.rows_max_tokens) {
    const int64_t done = table.rows(w + row_begin * row_bytes, row_bytes, row_end - row_begin, x, x_stride, num_tokens,
                                    cols, y + row_begin, y_stride);
    row_begin += done;
  }
  // Decode (one tile of tokens): stream the rows once. Prefill: block the rows so each block is
  // read from memory once and reused by every token tile.
  const int64_t row_block = num_tokens <= kMaxTileTokens ? row_end - row_begin : kRowBlock;
  for (int64_t rb = row_begin; rb < row_end; rb += row_block) {
    const int64_t rb_end = std::min(row_end, rb + row_block);
    for (int64_t t = 0; t < num_tokens; t += kMaxTileTokens) {
      const int nt = static_cast<int>(std::min<int64_t>(kMaxTileTokens, num_tokens - t));
      // Up to 4 rows x 4 tokens: 16 accumulators, 8 loads per 16 FMAs.
      for (int64_t r = rb; r < rb_end;) {
        const int ri = RowIndex(rb_end - r);
        const int nr = RowCount(ri);
        table.fn[ri][nt - 1](w + r * row_bytes, row_bytes, x + t * x_stride, x_stride, cols, y + t * y_stride + r,
                             y_stride);
        r += nr;
      }
    }
  }
}

template <class Out>
void RunMatMul(const TileTable<Out>& table, std::span<const WeightMatrix> parts, const float* x, int64_t num_tokens,
               std::span<Out* const> ys, ThreadPool* pool) {
  CHECK(pool != nullptr);
  CHECK_GE(num_tokens, 0);
  CHECK(!parts.empty());
  CHECK_EQ(parts.size(), ys.size());
  const WeightMatrix& w = parts[0];
  int64_t total_rows = 0;
  for (const WeightMatrix& part : parts) {
    CHECK(part.type == w.type && part.cols == w.cols) << "parts of one matmul differ in type or columns";
    total_rows += part.rows;
  }
  if (num_tokens == 0 || total_rows == 0) return;
  const int64_t row_bytes = DTypeRowBytes(w.type, w.cols);

  const uint8_t* xdata;
  int64_t x_stride;
  thread_local std::vector<BlockQ8Act> act;  // [T, cols / 32] scratch, reused across calls
  thread_local std::vector<float> rounded;   // [T, cols] BF16 weights' activations, reused across calls
  if (IsQuantized(w.type)) {
    const int64_t blocks = w.cols / kQuantBlock;
    if (static_cast<int64_t>(act.size()) < num_tokens * blocks) act.resize(num_tokens * blocks);
    BlockQ8Act* a = act.data();
    pool->ParallelFor(num_tokens, [&](int64_t begin, int64_t end) {
      for (int64_t t = begin; t < end; ++t) QuantizeActivationRow(x + t * w.cols, w.cols, a + t * blocks);
    });
    xdata = reinterpret_cast<const uint8_t*>(a);
    x_stride = blocks * static_cast<int64_t>(sizeof(BlockQ8Act));
  } else if (w.type == DType::kBF16) {
    // BF16 weights take BF16 activations, rounded to nearest even and held as f32 (exact): the operands of
    // AVX512-BF16's dot product, which the other levels' f32 fmas then equal bit for bit.
    // 64-byte aligned, as the activations it replaces: the decode streams load them a zmm at a time per row.
    const int64_t n = num_tokens * w.cols;
    if (static_cast<int64_t>(rounded.size()) < n + 16) rounded.resize(n + 16);
    float* r = rounded.data() + (-(reinterpret_cast<uintptr_t>(rounded.data()) / sizeof(float)) & 15);
    pool->ParallelFor(num_tokens, [&](int64_t begin, int64_t end) {
      RoundToBf16(x + begin * w.cols, (end - begin) * w.cols, r + begin * w.cols);
    });
    xdata = reinterpret_cast<const uint8_t*>(r);
    x_stride = w.cols * static_cast<int64_t>(sizeof(float));
  } else {
    xdata = reinterpret_cast<const uint8_t*>(x);
    x_stride = w.cols * static_cast<int64_t>(sizeof(float));
  }
  // Each thread owns a contiguous range of the parts' rows taken in order, so it streams a disjoint part
  // of the weights; the range is cut at part boundaries, and a tile never spans two parts.
  const bool flush = w.type == DType::kBF16;  // flush_denormals.h
  pool->ParallelFor(total_rows, [&](int64_t begin, int64_t end) {
    std::optional<FlushDenormalsScope> flushing;
    if (flush) flushing.emplace();
    int64_t first = 0;  // index of parts[i]'s first row among all the rows
    for (size_t i = 0; i < parts.size() && first < end; first += parts[i].rows, ++i) {
      const int64_t lo = std::max(begin, first) - first;
      const int64_t hi = std::min(end, first + parts[i].rows) - first;
      if (lo >= hi) continue;
      RunTiles(table, static_cast<const uint8_t*>(parts[i].data), row_bytes, lo, hi, xdata, x_stride, num_tokens,
               w.cols, ys[i], parts[i].rows);
    }
  });
}

template void RunTiles<float>(const TileTable<float>&, const uint8_t*, int64_t, int64_t, int64_t, const uint8_t*,
                              int64_t, int64_t, int64_t, float*, int64_t);
template void RunTiles<int64_t>(const TileTable<int64_t>&, const uint8_t*, int64_t, int64_t, int64_t,
                                const uint8_t*, int64_t, int64_t, int64_t, int64_t*, int64_t);
template void RunMatMul<float>(const TileTable<float>&, std::span<const WeightMatrix>, const float*, int64_t,
                               std::span<float* const>, ThreadPool*);
template void RunMatMul<int64_t>(const TileTable<int64_t>&, std::span<const WeightMatrix>, const float*, int64_t,
                                 std::span<int64_t* const>, ThreadPool*);

}  // namespace internal

void MatMulParts(std::span<const WeightMatrix> parts, const float* x, int64_t num_tokens, std::span<float* const> ys,
                 ThreadPool* pool) {
  CHECK(!parts.empty());
  const DType type = parts[0].type;
  CHECK(IsQuantized(type) || type == DType::kF32 || type == DType::kF16 || type == DType::kBF16)
      << "no matmul for " << DTypeName(type);
  const internal::IsaKernels& kernels = internal::ActiveKernels();
  const internal::TileTable<float>& table = IsQuantized(type) ? kernels.quant_tiles(type) : kernels.float_tiles(type);
  internal::RunMatMul(table, parts, x, num_tokens, ys, pool);
}

void MatMul(const WeightMatrix& w, const float* x, int64_t num_tokens, float* y, ThreadPool* pool) {
  MatMulParts({&w, 1}, x, num_tokens, {&y, 1}, pool);
}

}  // namespace tpserve
