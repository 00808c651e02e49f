// MatMul against a float64 product of the dequantised weights, and its batch invariance.
#include "kernels/cpu/matmul.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "common/dtype.h"
#include "tests/kernels/matmul_reference.h"

namespace tpserve {
namespace {

using testing::ExpectMatchesFloat64Reference;
using testing::MakeTestWeights;
using testing::RandomActivations;
using testing::TestWeights;

using testing::FitCols;

TEST(MatMulTest, MatchesFloat64ReferenceOnAwkwardShapes) {
  std::mt19937 rng(1234);
  for (DType type : kSupportedDTypes) {
    for (int64_t cols : FitCols(type, {32, 96, 576, 4096})) {
      for (int64_t rows : {1, 7, 37}) {
        for (int64_t num_tokens : {1, 3, 17}) {
          for (int threads : {1, 3}) {
            if (cols == 4096 && (rows > 7 || num_tokens > 3)) continue;  // keep the test fast
            ThreadPool pool(threads);
            const TestWeights w = MakeTestWeights(type, rows, cols, &rng);
            const std::vector<float> x = RandomActivations(num_tokens * cols, &rng);
            std::vector<float> y(num_tokens * rows, NAN);
            MatMul(w.matrix(), x.data(), num_tokens, y.data(), &pool);
            ExpectMatchesFloat64Reference(w, x, num_tokens, y);
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
      const TestWeights w = MakeTestWeights(type, 13, cols, &rng);
      const std::vector<float> x = RandomActivations(5 * cols, &rng);
      std::vector<float> y(5 * 13, NAN);
      MatMul(w.matrix(), x.data(), 5, y.data(), &pool);
      ExpectMatchesFloat64Reference(w, x, 5, y);
    }
  }
}

TEST(MatMulTest, LargePrefillMatchesReference) {
  std::mt19937 rng(5);
  for (DType type : {DType::kF32, DType::kQ4_1, DType::kQ4_K}) {
    ThreadPool pool(2);
    const TestWeights w = MakeTestWeights(type, 67, 256, &rng);
    const std::vector<float> x = RandomActivations(41 * 256, &rng);
    std::vector<float> y(41 * 67, NAN);
    MatMul(w.matrix(), x.data(), 41, y.data(), &pool);
    ExpectMatchesFloat64Reference(w, x, 41, y);
  }
}

// Row t of a T=7 (and T=17) batch equals, bit for bit, the T=1 call on that row alone, for
// 1, 2 and 3 threads; and the thread count itself changes no bit.
TEST(MatMulTest, BatchInvariantBitwise) {
  std::mt19937 rng(42);
  for (DType type : kSupportedDTypes) {
    const int64_t rows = 37, cols = FitCols(type, 320);
    const TestWeights w = MakeTestWeights(type, rows, cols, &rng);
    for (int64_t num_tokens : {7, 17}) {
      const std::vector<float> x = RandomActivations(num_tokens * cols, &rng);
      std::vector<float> first;
      for (int threads : {1, 2, 3}) {
        ThreadPool pool(threads);
        std::vector<float> y(num_tokens * rows);
        MatMul(w.matrix(), x.data(), num_tokens, y.data(), &pool);
        for (int64_t t = 0; t < num_tokens; ++t) {
          std::vector<float> single(rows);
          MatMul(w.matrix(), x.data() + t * cols, 1, single.data(), &pool);
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

// Parts in separate buffers (an empty one among them) give, bit for bit, the rows of one MatMul over
// their stack, for any T and thread count: a thread's rows are cut at part boundaries, and every
// output row keeps its operation sequence.
TEST(MatMulTest, PartsBitwiseEqualTheirStack) {
  std::mt19937 rng(77);
  for (DType type : kSupportedDTypes) {
    const int64_t cols = FitCols(type, 320);
    const std::vector<int64_t> part_rows = {9, 0, 5, 23};
    int64_t rows = 0;
    for (int64_t r : part_rows) rows += r;
    const TestWeights stack = MakeTestWeights(type, rows, cols, &rng);
    const int64_t row_bytes = DTypeRowBytes(type, cols);
    std::vector<std::vector<uint8_t>> copies;  // each part's bytes in its own buffer
    std::vector<WeightMatrix> parts;
    int64_t row = 0;
    for (int64_t r : part_rows) {
      copies.emplace_back(stack.bytes.begin() + row * row_bytes, stack.bytes.begin() + (row + r) * row_bytes);
      parts.push_back(WeightMatrix{type, r, cols, copies.back().data()});
      row += r;
    }
    for (int64_t num_tokens : {1, 3, 7, 17}) {
      const std::vector<float> x = RandomActivations(num_tokens * cols, &rng);
      for (int threads : {1, 2, 3}) {
        ThreadPool pool(threads);
        std::vector<float> y(num_tokens * rows);
        MatMul(stack.matrix(), x.data(), num_tokens, y.data(), &pool);
        std::vector<std::vector<float>> outs;
        std::vector<float*> ys;
        for (int64_t r : part_rows) outs.emplace_back(num_tokens * r, NAN);
        for (std::vector<float>& out : outs) ys.push_back(out.data());
        MatMulParts(parts, x.data(), num_tokens, ys, &pool);
        int64_t first = 0;
        for (size_t i = 0; i < parts.size(); ++i) {
          if (part_rows[i] == 0) continue;  // an empty part: nothing to compare (and its buffer is null)
          for (int64_t t = 0; t < num_tokens; ++t) {
            ASSERT_EQ(0, std::memcmp(y.data() + t * rows + first, outs[i].data() + t * part_rows[i],
                                     part_rows[i] * sizeof(float)))
                << DTypeName(type) << " part " << i << " token " << t << " of " << num_tokens << ", " << threads
                << " threads";
          }
          first += part_rows[i];
        }
      }
    }
  }
}

TEST(MatMulTest, ZeroTokensWritesNothing) {
  std::mt19937 rng(7);
  ThreadPool pool(2);
  const TestWeights w = MakeTestWeights(DType::kQ8_0, 4, 64, &rng);
  float y = 123.0f;
  MatMul(w.matrix(), nullptr, 0, &y, &pool);
  EXPECT_EQ(y, 123.0f);
}

}  // namespace
}  // namespace tpserve
