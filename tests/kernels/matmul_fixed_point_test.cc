// MatMulFixedPoint: a matrix split into column ranges at chunk boundaries, multiplied piecewise
// and summed as int64, equals the whole matrix bit for bit (what makes every TP degree agree);
// the result is close to a float64 reference; it is batch and thread invariant; and
// FixedPointRange admits exactly what stays exact.
#include "kernels/cpu/matmul_fixed_point.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "common/dtype.h"
#include "kernels/cpu/fixed_point_range.h"
#include "tests/kernels/matmul_reference.h"

namespace tpserve {
namespace {

using testing::ExpectMatchesFloat64Reference;
using testing::MakeTestWeights;
using testing::RandomActivations;
using testing::TestWeights;

// Columns [begin, end) of every row, in the stored form (a row-parallel rank's slice).
TestWeights ColumnSlice(const TestWeights& w, int64_t begin, int64_t end) {
  TestWeights s{w.type, w.rows, end - begin, {}, {}};
  const int64_t row_bytes = DTypeRowBytes(w.type, w.cols);
  const int64_t offset = DTypeRowBytes(w.type, begin), slice_bytes = DTypeRowBytes(w.type, end - begin);
  s.bytes.resize(w.rows * slice_bytes);
  for (int64_t r = 0; r < w.rows; ++r) {
    std::memcpy(s.bytes.data() + r * slice_bytes, w.bytes.data() + r * row_bytes + offset, slice_bytes);
  }
  return s;
}

// Columns [begin, end) of x[T, cols].
std::vector<float> Columns(const std::vector<float>& x, int64_t num_tokens, int64_t cols, int64_t begin,
                           int64_t end) {
  std::vector<float> out;
  for (int64_t t = 0; t < num_tokens; ++t) {
    out.insert(out.end(), x.begin() + t * cols + begin, x.begin() + t * cols + end);
  }
  return out;
}

std::vector<int64_t> Fixed(const TestWeights& w, const std::vector<float>& x, int64_t num_tokens, ThreadPool* pool) {
  std::vector<int64_t> y(num_tokens * w.rows, 0x5a5a5a5a);
  MatMulFixedPoint(w.matrix(), x.data(), num_tokens, y.data(), pool);
  return y;
}

using testing::FitCols;

// Random split points on chunk boundaries (32 columns, 256 for K-quants whose data splits only at
// super-blocks; 16 for float weights), at least one chunk apart.
std::vector<int64_t> RandomSplit(int64_t cols, int64_t chunk, int pieces, std::mt19937* rng) {
  const int64_t num_chunks = (cols + chunk - 1) / chunk;
  std::vector<int64_t> bounds = {0};
  for (int p = 1; p < pieces; ++p) {
    const int64_t lo = bounds.back() / chunk + 1, hi = num_chunks - (pieces - p);
    std::uniform_int_distribution<int64_t> pick(lo, std::max(lo, hi));
    bounds.push_back(std::min(cols, pick(*rng) * chunk));
  }
  bounds.push_back(cols);
  return bounds;
}

TEST(MatMulFixedPointTest, ColumnSplitsSumToTheWholeMatrixBitForBit) {
  std::mt19937 rng(2024);
  for (DType type : kSupportedDTypes) {
    const int64_t chunk = IsQuantized(type) ? DTypeBlockElems(type) : 16;
    // Float widths include a tail chunk (200 = 12·16 + 8) on the last piece.
    for (int64_t cols : IsKQuant(type)    ? std::vector<int64_t>{1024, 1536}
                        : IsQuantized(type) ? std::vector<int64_t>{320, 576}
                                            : std::vector<int64_t>{200, 576}) {
      for (int64_t rows : {1, 7, 37}) {
        for (int64_t num_tokens : {1, 3, 7}) {
          for (int pieces : {2, 3, 4}) {
            ThreadPool pool(pieces == 3 ? 2 : 1);
            const TestWeights w = MakeTestWeights(type, rows, cols, &rng);
            const std::vector<float> x = RandomActivations(num_tokens * cols, &rng);
            const std::vector<int64_t> whole = Fixed(w, x, num_tokens, &pool);
            const std::vector<int64_t> bounds = RandomSplit(cols, chunk, pieces, &rng);
            std::vector<int64_t> sum(whole.size(), 0);
            for (size_t p = 0; p + 1 < bounds.size(); ++p) {
              const TestWeights part = ColumnSlice(w, bounds[p], bounds[p + 1]);
              const std::vector<int64_t> y =
                  Fixed(part, Columns(x, num_tokens, cols, bounds[p], bounds[p + 1]), num_tokens, &pool);
              for (size_t i = 0; i < sum.size(); ++i) sum[i] += y[i];
            }
            ASSERT_EQ(sum, whole) << DTypeName(type) << " rows=" << rows << " cols=" << cols << " T=" << num_tokens
                                  << " pieces=" << pieces << " split at " << bounds[1];
          }
        }
      }
    }
  }
}

// The converted result against Σ w·x in f64. Tolerance: f32 rounding of the products and lane sums
// (1e-5 of Σ|w·x|), the activation rounding of quantised weights (Σ_block Σ|w| · max|x| / 254, as
// in matmul_test), and the fixed-point rounding (half a unit, 2^-33, per term: ≤ cols terms).
TEST(MatMulFixedPointTest, MatchesFloat64Reference) {
  std::mt19937 rng(77);
  for (DType type : kSupportedDTypes) {
    for (int64_t cols : FitCols(type, {32, 96, 576, 1536})) {
      for (int64_t rows : {1, 7, 37}) {
        for (int64_t num_tokens : {1, 3, 7}) {
          if (cols == 1536 && rows > 7) continue;  // keep the test fast
          ThreadPool pool(2);
          const TestWeights w = MakeTestWeights(type, rows, cols, &rng);
          const std::vector<float> x = RandomActivations(num_tokens * cols, &rng);
          const std::vector<int64_t> fixed = Fixed(w, x, num_tokens, &pool);
          std::vector<float> y(fixed.size());
          FixedPointToFloat(fixed.data(), static_cast<int64_t>(fixed.size()), y.data());
          ExpectMatchesFloat64Reference(w, x, num_tokens, y, /*per_term_error=*/0x1p-33);
        }
      }
    }
  }
}

// Row t of a batch equals the T=1 call on that row alone, for 1, 2 and 3 threads, bit for bit.
TEST(MatMulFixedPointTest, BatchAndThreadInvariant) {
  std::mt19937 rng(42);
  for (DType type : kSupportedDTypes) {
    const int64_t rows = 37, cols = FitCols(type, 320);
    const TestWeights w = MakeTestWeights(type, rows, cols, &rng);
    const int64_t num_tokens = 7;
    const std::vector<float> x = RandomActivations(num_tokens * cols, &rng);
    std::vector<int64_t> first;
    for (int threads : {1, 2, 3}) {
      ThreadPool pool(threads);
      const std::vector<int64_t> y = Fixed(w, x, num_tokens, &pool);
      for (int64_t t = 0; t < num_tokens; ++t) {
        const std::vector<float> row(x.begin() + t * cols, x.begin() + (t + 1) * cols);
        const std::vector<int64_t> single = Fixed(w, row, 1, &pool);
        ASSERT_TRUE(std::equal(single.begin(), single.end(), y.begin() + t * rows))
            << DTypeName(type) << " token " << t << ", " << threads << " threads";
      }
      if (first.empty()) first = y;
      ASSERT_EQ(first, y) << DTypeName(type) << " differs between 1 and " << threads << " threads";
    }
  }
}

TEST(MatMulFixedPointTest, ToFloatRoundsOnce) {
  const std::vector<int64_t> fixed = {0, 1LL << 32, -(3LL << 31), 1, (1LL << 56) + 1};
  std::vector<float> out(fixed.size());
  FixedPointToFloat(fixed.data(), static_cast<int64_t>(fixed.size()), out.data());
  EXPECT_EQ(out[0], 0.0f);
  EXPECT_EQ(out[1], 1.0f);
  EXPECT_EQ(out[2], -1.5f);
  EXPECT_EQ(out[3], 0x1p-32f);
  EXPECT_EQ(out[4], 0x1p24f);  // 2^24 + 2^-32 rounds to 2^24
}

// Inputs scaled up to just inside the admitted range still give the reference result (no
// wrap-around); scaled past it, or non-finite, they are refused.
TEST(FixedPointRangeTest, AdmitsWhatStaysExactAndRefusesTheRest) {
  std::mt19937 rng(9);
  for (DType type : kSupportedDTypes) {
    const int64_t rows = 9, cols = 256, num_tokens = 3;
    const TestWeights w = MakeTestWeights(type, rows, cols, &rng);
    const FixedPointRange range(w.matrix());
    std::vector<float> x = RandomActivations(num_tokens * cols, &rng);
    ASSERT_TRUE(range.Admits(x.data(), num_tokens)) << DTypeName(type);
    // Grow x by powers of two until refused; the last admitted one must still be accurate.
    std::vector<float> admitted = x;
    for (float scale = 2.0f;; scale *= 2.0f) {
      std::vector<float> grown(x.size());
      for (size_t i = 0; i < x.size(); ++i) grown[i] = x[i] * scale;
      if (!range.Admits(grown.data(), num_tokens)) break;
      admitted = grown;
      ASSERT_LT(scale, 1e9f) << DTypeName(type) << ": never refused";
    }
    ThreadPool pool(1);
    const std::vector<int64_t> fixed = Fixed(w, admitted, num_tokens, &pool);
    double largest = 0.0;
    for (int64_t t = 0; t < num_tokens; ++t) {
      for (int64_t r = 0; r < rows; ++r) {
        double exact = 0.0, magnitude = 0.0;
        for (int64_t k = 0; k < cols; ++k) {
          exact += static_cast<double>(w.dequant[r * cols + k]) * admitted[t * cols + k];
          magnitude += std::fabs(static_cast<double>(w.dequant[r * cols + k]) * admitted[t * cols + k]);
        }
        const double got = static_cast<double>(fixed[t * rows + r]) * 0x1p-32;
        EXPECT_NEAR(got, exact, 2e-2 * magnitude) << DTypeName(type);
        largest = std::max(largest, std::fabs(exact));
      }
    }
    EXPECT_GT(largest, 1e3) << DTypeName(type) << ": the range should not be needlessly tight";
    std::vector<float> bad = x;
    bad[5] = NAN;
    EXPECT_FALSE(range.Admits(bad.data(), num_tokens));
    bad[5] = INFINITY;
    EXPECT_FALSE(range.Admits(bad.data(), num_tokens));
  }
}

TEST(FixedPointRangeTest, EmptyMatrixAdmitsEverything) {
  const FixedPointRange range;
  EXPECT_TRUE(range.Admits(nullptr, 4));
}

}  // namespace
}  // namespace tpserve
