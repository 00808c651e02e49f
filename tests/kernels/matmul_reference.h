// Shared by the matmul kernel tests: random weights in any stored type beside the exact values the
// stored form represents, random activations, and the check of a product against Σ w·x in float64.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <random>
#include <vector>

#include "common/dtype.h"
#include "kernels/cpu/weight_matrix.h"

namespace tpserve::testing {

struct TestWeights {
  DType type = DType::kF32;
  int64_t rows = 0, cols = 0;
  std::vector<uint8_t> bytes;  // stored form [rows, cols]
  std::vector<float> dequant;  // [rows, cols] the exact values the stored form represents
  WeightMatrix matrix() const { return WeightMatrix{type, rows, cols, bytes.data()}; }
};

inline TestWeights MakeTestWeights(DType type, int64_t rows, int64_t cols, std::mt19937* rng) {
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> src(rows * cols);
  for (float& v : src) v = dist(*rng);
  TestWeights w{type, rows, cols, {}, {}};
  const int64_t row_bytes = DTypeRowBytes(type, cols);
  w.bytes.resize(rows * row_bytes);
  w.dequant.resize(rows * cols);
  for (int64_t r = 0; r < rows; ++r) {
    QuantizeRow(type, src.data() + r * cols, w.bytes.data() + r * row_bytes, cols);
    DequantizeRow(type, w.bytes.data() + r * row_bytes, w.dequant.data() + r * cols, cols);
  }
  return w;
}

// Weights whose blocks are random bytes (every packing, sign and scale pattern a file can hold,
// not only what QuantizeRow writes), with each fp16 scale field set to a random finite value of
// magnitude 2^-10..2^-4. REQUIRES: IsQuantized(type).
inline TestWeights RandomBlockWeights(DType type, int64_t rows, int64_t cols, std::mt19937* rng) {
  TestWeights w{type, rows, cols, {}, {}};
  const int64_t row_bytes = DTypeRowBytes(type, cols);
  w.bytes.resize(rows * row_bytes);
  for (uint8_t& b : w.bytes) b = static_cast<uint8_t>((*rng)() & 0xff);
  std::uniform_real_distribution<float> mag(-10.0f, -4.0f);
  auto scale = [&](uint16_t* field) { *field = F32ToFp16(((*rng)() & 1 ? -1.0f : 1.0f) * std::exp2(mag(*rng))); };
  const int64_t num_blocks = rows * cols / DTypeBlockElems(type);
  for (int64_t i = 0; i < num_blocks; ++i) {
    uint8_t* p = w.bytes.data() + i * DTypeBlockBytes(type);
    switch (type) {
      case DType::kQ8_0: scale(&reinterpret_cast<BlockQ8_0*>(p)->d); break;
      case DType::kQ4_0: scale(&reinterpret_cast<BlockQ4_0*>(p)->d); break;
      case DType::kQ4_1: scale(&reinterpret_cast<BlockQ4_1*>(p)->d), scale(&reinterpret_cast<BlockQ4_1*>(p)->m); break;
      case DType::kQ5_0: scale(&reinterpret_cast<BlockQ5_0*>(p)->d); break;
      case DType::kQ5_1: scale(&reinterpret_cast<BlockQ5_1*>(p)->d), scale(&reinterpret_cast<BlockQ5_1*>(p)->m); break;
      case DType::kQ2_K: scale(&reinterpret_cast<BlockQ2_K*>(p)->d), scale(&reinterpret_cast<BlockQ2_K*>(p)->dmin); break;
      case DType::kQ3_K: scale(&reinterpret_cast<BlockQ3_K*>(p)->d); break;
      case DType::kQ4_K: scale(&reinterpret_cast<BlockQ4_K*>(p)->d), scale(&reinterpret_cast<BlockQ4_K*>(p)->dmin); break;
      case DType::kQ5_K: scale(&reinterpret_cast<BlockQ5_K*>(p)->d), scale(&reinterpret_cast<BlockQ5_K*>(p)->dmin); break;
      case DType::kQ6_K: scale(&reinterpret_cast<BlockQ6_K*>(p)->d); break;
      default: ADD_FAILURE() << "not quantised: " << DTypeName(type);
    }
  }
  w.dequant.resize(rows * cols);
  for (int64_t r = 0; r < rows; ++r) DequantizeRow(type, w.bytes.data() + r * row_bytes, w.dequant.data() + r * cols, cols);
  return w;
}

// `cols` rounded up to a whole number of the type's blocks (256 for K-quants, 32 for the other quantised
// types), and a list of widths so fitted, duplicates dropped.
inline int64_t FitCols(DType type, int64_t cols) {
  const int64_t block = DTypeBlockElems(type);
  return (cols + block - 1) / block * block;
}
inline std::vector<int64_t> FitCols(DType type, std::initializer_list<int64_t> widths) {
  std::vector<int64_t> out;
  for (int64_t c : widths) {
    const int64_t fitted = FitCols(type, c);
    if (out.empty() || out.back() != fitted) out.push_back(fitted);
  }
  return out;
}

inline std::vector<float> RandomActivations(int64_t n, std::mt19937* rng) {
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(n);
  for (float& v : x) v = dist(*rng);
  return x;
}

// Checks y[T, rows] against Σ w·x in f64 (x rounded to bf16 for BF16 weights). The allowed error is f32 rounding of the sum of |terms|
// plus, for quantised weights, the activation rounding (each x in a block of 32 moves by at most
// max|x_block| / 254, so the dot moves by at most Σ_block Σ|w| · max|x| / 254), plus
// `per_term_error` for each of the cols terms (the fixed-point rounding, for example).
inline void ExpectMatchesFloat64Reference(const TestWeights& w, const std::vector<float>& x, int64_t num_tokens,
                                          const std::vector<float>& y, double per_term_error = 0.0) {
  const int64_t rows = w.rows, cols = w.cols;
  for (int64_t t = 0; t < num_tokens; ++t) {
    const float* xt = x.data() + t * cols;
    for (int64_t r = 0; r < rows; ++r) {
      const float* wr = w.dequant.data() + r * cols;
      double exact = 0.0, magnitude = 0.0, quant_bound = 0.0;
      for (int64_t k = 0; k < cols; ++k) {
        // BF16 weights take the activations rounded to bf16 (README "Decisions"), so the reference does too:
        // unrounded, the sums would differ by up to 2^-8 of the magnitude, 400 times the tolerance.
        const double xk = w.type == DType::kBF16 ? Bf16ToF32(F32ToBf16(xt[k])) : xt[k];
        exact += static_cast<double>(wr[k]) * xk;
        magnitude += std::fabs(static_cast<double>(wr[k]) * xk);
      }
      if (IsQuantized(w.type)) {
        for (int64_t b = 0; b < cols / 32; ++b) {
          double amax = 0.0, wsum = 0.0;
          for (int j = 0; j < 32; ++j) {
            amax = std::fmax(amax, std::fabs(xt[b * 32 + j]));
            wsum += std::fabs(wr[b * 32 + j]);
          }
          quant_bound += wsum * amax / 254.0;
        }
      }
      const double tol = 1e-5 * magnitude + 1.001 * quant_bound + cols * per_term_error + 1e-6;
      ASSERT_NEAR(y[t * rows + r], exact, tol) << DTypeName(w.type) << " t=" << t << " r=" << r << " rows=" << rows
                                               << " cols=" << cols << " T=" << num_tokens;
    }
  }
}

}  // namespace tpserve::testing
