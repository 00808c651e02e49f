// MatMul against a float64 product of the dequantised weights, and its batch invariance.
#include "kernels/cpu/matmul.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "common/dtype.h"

namespace tpserve {
namespace {

struct Weights {
  WeightMatrix matrix;
  std::vector<uint8_t> bytes;   // stored form
  std::vector<float> dequant;   // [rows, cols] the exact values the stored form represents
};

Weights MakeWeights(DType type, int64_t rows, int64_t cols, std::mt19937* rng) {
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> src(rows * cols);
  for (float& v : src) v = dist(*rng);
  Weights w;
  const int64_t row_bytes = DTypeRowBytes(type, cols);
  w.bytes.resize(rows * row_bytes);
  w.dequant.resize(rows * cols);
  for (int64_t r = 0; r < rows; ++r) {
    QuantizeRow(type, src.data() + r * cols, w.bytes.data() + r * row_bytes, cols);
    DequantizeRow(type, w.bytes.data() + r * row_bytes, w.dequant.data() + r * cols, cols);
  }
  w.matrix = WeightMatrix{type, rows, cols, w.bytes.data()};
  return w;
}

std::vector<float> RandomActivations(int64_t n, std::mt19937* rng) {
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(n);
  for (float& v : x) v = dist(*rng);
  return x;
}

// Checks y against Σ w·x in f64. The allowed error is f32 rounding of the sum of |terms| plus,
// for quantised weights, the activation rounding: each x in a block of 32 moves by at most
// max|x_block| / 254, so the dot moves by at most Σ_block Σ|w| · max|x| / 254.
void ExpectMatchesReference(const Weights& w, const std::vector<float>& x, int64_t num_tokens,
                            const std::vector<float>& y) {
  const int64_t rows = w.matrix.rows, cols = w.matrix.cols;
  const bool quantized = IsQuantized(w.matrix.type);
  for (int64_t t = 0; t < num_tokens; ++t) {
    const float* xt = x.data() + t * cols;
    for (int64_t r = 0; r < rows; ++r) {
      const float* wr = w.dequant.data() + r * cols;
      double exact = 0.0, magnitude = 0.0, quant_bound = 0.0;
      for (int64_t k = 0; k < cols; ++k) {
        exact += static_cast<double>(wr[k]) * xt[k];
        magnitude += std::fabs(static_cast<double>(wr[k]) * xt[k]);
      }
      if (quantized) {
        for (int64_t b = 0; b < cols / 32; ++b) {
          double amax = 0.0, wsum = 0.0;
          for (int j = 0; j < 32; ++j) {
            amax = std::fmax(amax, std::fabs(xt[b * 32 + j]));
            wsum += std::fabs(wr[b * 32 + j]);
          }
          quant_bound += wsum * amax / 254.0;
        }
      }
      const double tol = 1e-5 * magnitude + 1.001 * quant_bound + 1e-6;
      ASSERT_NEAR(y[t * rows + r], exact, tol) << DTypeName(w.matrix.type) << " t=" << t << " r=" << r
                                               << " rows=" << rows << " cols=" << cols << " T=" << num_tokens;
    }
  }
}

const DType kAllTypes[] = {DType::kF32, DType::kF16, DType::kBF16, DType::kQ8_0, DType::kQ4_0, DType::kQ4_1};

TEST(MatMulTest, MatchesFloat64ReferenceOnAwkwardShapes) {
  std::mt19937 rng(1234);
  for (DType type : kAllTypes) {
    for (int64_t cols : {32, 96, 576, 4096}) {
      for (int64_t rows : {1, 7, 37}) {
        for (int64_t num_tokens : {1, 3, 17}) {
          for (int threads : {1, 3}) {
            if (cols == 4096 && (rows > 7 || num_tokens > 3)) continue;  // keep the test fast
            ThreadPool pool(threads);
            const Weights w = MakeWeights(type, rows, cols, &rng);
            const std::vector<float> x = RandomActivations(num_tokens * cols, &rng);
            std::vector<float> y(num_tokens * rows, NAN);
            MatMul(w.matrix, x.data(), num_tokens, y.data(), &pool);
            ExpectMatchesReference(w, x, num_tokens, y);
          }
        }
      }
    }
  }
}

TEST(MatMulTest, FloatTypesHandleColumnsThatAreNotAMultipleOfTheVectorWidth) {
  std::mt19937 rng(99);
  for (DType type : {DType::kF32, DType::kF16, DType::kBF16}) {
    for (int64_t cols : {1, 15, 17, 33, 100, 1001}) {
      ThreadPool pool(2);
      const Weights w = MakeWeights(type, 13, cols, &rng);
      const std::vector<float> x = RandomActivations(5 * cols, &rng);
      std::vector<float> y(5 * 13, NAN);
      MatMul(w.matrix, x.data(), 5, y.data(), &pool);
      ExpectMatchesReference(w, x, 5, y);
    }
  }
}

TEST(MatMulTest, LargePrefillMatchesReference) {
  std::mt19937 rng(5);
  for (DType type : {DType::kF32, DType::kQ4_1}) {
    ThreadPool pool(2);
    const Weights w = MakeWeights(type, 67, 256, &rng);
    const std::vector<float> x = RandomActivations(41 * 256, &rng);
    std::vector<float> y(41 * 67, NAN);
    MatMul(w.matrix, x.data(), 41, y.data(), &pool);
    ExpectMatchesReference(w, x, 41, y);
  }
}

// Row t of a T=7 (and T=17) batch equals, bit for bit, the T=1 call on that row alone, for
// 1, 2 and 3 threads; and the thread count itself changes no bit.
TEST(MatMulTest, BatchInvariantBitwise) {
  std::mt19937 rng(42);
  for (DType type : kAllTypes) {
    const int64_t rows = 37, cols = 320;
    const Weights w = MakeWeights(type, rows, cols, &rng);
    for (int64_t num_tokens : {7, 17}) {
      const std::vector<float> x = RandomActivations(num_tokens * cols, &rng);
      std::vector<float> first;
      for (int threads : {1, 2, 3}) {
        ThreadPool pool(threads);
        std::vector<float> y(num_tokens * rows);
        MatMul(w.matrix, x.data(), num_tokens, y.data(), &pool);
        for (int64_t t = 0; t < num_tokens; ++t) {
          std::vector<float> single(rows);
          MatMul(w.matrix, x.data() + t * cols, 1, single.data(), &pool);
          ASSERT_EQ(0, std::memcmp(single.data(), y.data() + t * rows, rows * sizeof(float)))
              << DTypeName(type) << " token " << t << " of " << num_tokens << ", " << threads << " threads";
        }
        if (first.empty()) first = y;
        ASSERT_EQ(0, std::memcmp(first.data(), y.data(), y.size() * sizeof(float)))
            << DTypeName(type) << " differs between 1 and " << threads << " threads";
      }
    }
  }
}

TEST(MatMulTest, ZeroTokensWritesNothing) {
  std::mt19937 rng(7);
  ThreadPool pool(2);
  const Weights w = MakeWeights(DType::kQ8_0, 4, 64, &rng);
  float y = 123.0f;
  MatMul(w.matrix, nullptr, 0, &y, &pool);
  EXPECT_EQ(y, 123.0f);
}

}  // namespace
}  // namespace tpserve
