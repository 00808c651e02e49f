#include "kernels/cpu/fixed_point_range.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "common/dtype.h"
#include "common/quant_block.h"
#include "kernels/cpu/matmul_fixed_point.h"

namespace tpserve {
namespace {

// The largest |q| a type stores (QuantBlock::q, offsets removed).
float MaxAbsQuant(DType type) {
  switch (type) {
    case DType::kQ8_0: return 128.0f;
    case DType::kQ4_0: return 8.0f;
    case DType::kQ5_0: return 16.0f;
    case DType::kQ4_1: case DType::kQ4_K: return 15.0f;
    case DType::kQ5_1: case DType::kQ5_K: return 31.0f;
    case DType::kQ2_K: return 3.0f;
    case DType::kQ3_K: return 4.0f;
    default: return 32.0f;  // Q6_K
  }
}

// An upper bound, from the block header alone, of each of the block's terms per unit of activation:
// |d| · max|scale| times the largest stored |q|, plus the offset |m| or Q2_K's |dmin| · max min (the
// separate minimum terms are bounded too, not only their sum with the scaled term).
float BlockBound(DType type, const uint8_t* row, int64_t b) {
  QuantBlock blk;
  DecodeQuantBlock(type, row, b, &blk);
  const float scale = static_cast<float>(std::max(std::abs(blk.scale[0]), std::abs(blk.scale[1])));
  const float min = static_cast<float>(std::max(blk.min[0], blk.min[1]));
  return std::fabs(blk.d) * scale * MaxAbsQuant(type) + std::fabs(blk.m) + std::fabs(blk.dmin) * min;
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

bool FixedPointRange::TokenAdmitted(const float* xt) const {
  constexpr float kLimit = kFixedPointMaxMagnitude / 2;
  constexpr int kParts = 16;  // partial sums in a fixed order, so the loop vectorises with the same bits
  const int64_t cols = static_cast<int64_t>(col_bound_.size());
  float part[kParts] = {};
  int64_t k = 0;
  for (; k + kParts <= cols; k += kParts) {
    for (int j = 0; j < kParts; ++j) part[j] += col_bound_[k + j] * std::fabs(xt[k + j]);
  }
  for (; k < cols; ++k) part[0] += col_bound_[k] * std::fabs(xt[k]);
  float bound = 0.0f;
  for (float p : part) bound += p;
  if (quantized_) {
    for (size_t b = 0; b < block_bound_.size(); ++b) {
      // max |x| over the block in 16 lanes first (one running max was scalar, half of this check's time): the
      // max of finite values is the same in any order, and a NaN or infinity has already made `bound` NaN or
      // infinite.
      using Lanes = float __attribute__((vector_size(kParts * sizeof(float))));
      using Bits = int32_t __attribute__((vector_size(kParts * sizeof(float))));
      Lanes lanes = {};
      for (int64_t j = 0; j < kQuantBlock; j += kParts) {
        Bits bits;
        std::memcpy(&bits, xt + b * kQuantBlock + j, sizeof bits);
        const Lanes v = reinterpret_cast<Lanes>(bits & 0x7fffffff);  // |x|
        lanes = lanes < v ? v : lanes;
      }
      float lane[kParts];
      std::memcpy(lane, &lanes, sizeof lane);
      float amax = 0.0f;
      for (float v : lane) amax = std::max(amax, v);
      bound += block_bound_[b] * (amax / 254.0f);
    }
  }
  return bound <= kLimit;  // also false for NaN and infinities
}

bool FixedPointRange::Admits(const float* x, int64_t num_tokens, ThreadPool* pool) const {
  const int64_t cols = static_cast<int64_t>(col_bound_.size());
  if (pool == nullptr || num_tokens == 1) {
    for (int64_t t = 0; t < num_tokens; ++t) {
      if (!TokenAdmitted(x + t * cols)) return false;
    }
    return true;
  }
  std::atomic<bool> admitted{true};
  pool->ParallelFor(num_tokens, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end && admitted.load(std::memory_order_relaxed); ++t) {
      if (!TokenAdmitted(x + t * cols)) admitted.store(false, std::memory_order_relaxed);
    }
  });
  return admitted.load();
}

}  // namespace tpserve
