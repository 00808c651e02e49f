#include "kernels/cpu/fixed_point_range.h"

#include <algorithm>
#include <cmath>

#include "common/dtype.h"
#include "kernels/cpu/matmul_fixed_point.h"

namespace tpserve {
namespace {

// An upper bound of |w| over block b of one quantised row: |d| times the largest stored |q|
// (Q8_0: -128..127, Q4_0: -8..7, Q4_1: 0..15), plus Q4_1's |m|.
float BlockBound(DType type, const uint8_t* row, int64_t b) {
  if (type == DType::kQ8_0) return std::fabs(Fp16ToF32(reinterpret_cast<const BlockQ8_0*>(row)[b].d)) * 128.0f;
  if (type == DType::kQ4_0) return std::fabs(Fp16ToF32(reinterpret_cast<const BlockQ4_0*>(row)[b].d)) * 8.0f;
  const BlockQ4_1& blk = reinterpret_cast<const BlockQ4_1*>(row)[b];
  return std::fabs(Fp16ToF32(blk.d)) * 15.0f + std::fabs(Fp16ToF32(blk.m));
}

}  // namespace

FixedPointRange::FixedPointRange(const WeightMatrix& w) : quantized_(IsQuantized(w.type)), col_bound_(w.cols, 0.0f) {
  const int64_t row_bytes = DTypeRowBytes(w.type, w.cols);
  const auto* data = static_cast<const uint8_t*>(w.data);
  if (quantized_) {
    const int64_t num_blocks = w.cols / kQuantBlock;
    block_bound_.assign(num_blocks, 0.0f);
    for (int64_t r = 0; r < w.rows; ++r) {
      for (int64_t b = 0; b < num_blocks; ++b) {
        block_bound_[b] = std::max(block_bound_[b], BlockBound(w.type, data + r * row_bytes, b));
      }
    }
    for (int64_t k = 0; k < w.cols; ++k) col_bound_[k] = block_bound_[k / kQuantBlock];
    for (float& bound : block_bound_) bound *= kQuantBlock;
  } else {
    std::vector<float> row(w.cols);
    for (int64_t r = 0; r < w.rows; ++r) {
      DequantizeRow(w.type, data + r * row_bytes, row.data(), w.cols);
      for (int64_t k = 0; k < w.cols; ++k) col_bound_[k] = std::max(col_bound_[k], std::fabs(row[k]));
    }
  }
}

bool FixedPointRange::Admits(const float* x, int64_t num_tokens) const {
  constexpr float kLimit = kFixedPointMaxMagnitude / 2;
  const int64_t cols = static_cast<int64_t>(col_bound_.size());
  for (int64_t t = 0; t < num_tokens; ++t) {
    const float* xt = x + t * cols;
    float bound = 0.0f;
    for (int64_t k = 0; k < cols; ++k) bound += col_bound_[k] * std::fabs(xt[k]);
    if (quantized_) {
      for (size_t b = 0; b < block_bound_.size(); ++b) {
        float amax = 0.0f;
        for (int64_t j = 0; j < kQuantBlock; ++j) amax = std::max(amax, std::fabs(xt[b * kQuantBlock + j]));
        bound += block_bound_[b] * (amax / 254.0f);
      }
    }
    if (!(bound <= kLimit)) return false;  // also catches NaN and infinities
  }
  return true;
}

}  // namespace tpserve
