// Every SIMD level of every dispatched kernel equals the portable level (the canonical order in
// scalar code) bit for bit, on seeded random inputs and awkward sizes. Each machine checks the
// levels its CPU has; since all equal the portable one, they equal each other on any machine.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/cpu/isa.h"
#include "kernels/cpu/isa_kernels.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/matmul_fixed_point.h"
#include "kernels/cpu/matmul_tile.h"
#include "kernels/cpu/portable_math.h"
#include "kernels/cpu/quantize_activations.h"
#include "tests/kernels/matmul_reference.h"

namespace tpserve {
namespace {

using testing::MakeTestWeights;
using testing::RandomActivations;
using testing::TestWeights;

using testing::FitCols;

// Runs fn() with the kernels at `isa`, then restores the level that was active.
template <class Fn>
void RunAt(Isa isa, Fn fn) {
  const Isa before = ActiveIsa();
  SetActiveIsaForTesting(isa);
  fn();
  SetActiveIsaForTesting(before);
}

template <class T>
bool BitwiseEqual(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

class IsaEqualityTest : public ::testing::TestWithParam<Isa> {
 protected:
  void SetUp() override {
    if (!IsaCompiledIn(GetParam())) GTEST_SKIP() << IsaName(GetParam()) << " not in this build (TPSERVE_DISPATCH=OFF)";
    if (!CpuSupportsIsa(GetParam())) GTEST_SKIP() << "this CPU lacks " << IsaName(GetParam());
  }
};

// Float weights: column counts around the 16-lane width and its multiples (tails, n < 16).
TEST_P(IsaEqualityTest, MatMulEqualsPortableBitwise) {
  std::mt19937 rng(2024);
  ThreadPool pool(2);
  for (DType type : kSupportedDTypes) {
    const bool quantized = IsQuantized(type);
    const std::vector<int64_t> float_cols = {1, 7, 8, 9, 15, 16, 17, 31, 33, 64, 100, 1001};
    const std::vector<int64_t> quant_cols = FitCols(type, {32, 64, 96, 576});
    for (int64_t cols : quantized ? quant_cols : float_cols) {
      // 100: two whole panels of 48 (three of 32) and a part. One token reads four quads of rows at a time: 27,
      // 37 and 44 end with 2, 1 and 3 of them (one thread's rows; two threads split them too).
      for (int64_t rows : {1, 3, 7, 27, 37, 44, 100}) {
        // Tiles, and (kPanelMinTokens, float weights kFloatPanelMinTokens, and up) the panels with their
        // token tails.
        for (int64_t num_tokens : {int64_t{1}, int64_t{2}, int64_t{3}, int64_t{5}, int64_t{17}, internal::kPanelMinTokens,
                                   internal::kPanelMinTokens + 7, internal::kFloatPanelMinTokens + 7}) {
          const TestWeights w = MakeTestWeights(type, rows, cols, &rng);
          std::vector<float> x = RandomActivations(num_tokens * cols, &rng);
          if (cols > 2) x[1] = -0.0f;  // signed zeros and exact cancellations are part of the order
          std::vector<float> want(num_tokens * rows), got(num_tokens * rows);
          RunAt(Isa::kPortable, [&] { MatMul(w.matrix(), x.data(), num_tokens, want.data(), &pool); });
          RunAt(GetParam(), [&] { MatMul(w.matrix(), x.data(), num_tokens, got.data(), &pool); });
          ASSERT_TRUE(BitwiseEqual(want, got)) << DTypeName(type) << " rows " << rows << " cols " << cols << " T "
                                               << num_tokens;
        }
      }
    }
  }
}

// BF16 weights and activations of random exponents, so that inputs, products and sums are denormal: AVX512-BF16's
// dot product reads denormals as zero and writes them as zero, and every level's BF16 matmul must do the same
// (kernels/cpu/flush_denormals.h), in the tiles and in the panels. MatMul: both spread from 2^-135 to 1.
// MatMulFixedPoint: weights from 2^-135 to 2^-120 against activations from 2^100 to 2^110, so that a denormal
// weight's product (2^-35 and up) shows in the integers (units of 2^-32) while the sums stay in range.
TEST_P(IsaEqualityTest, Bf16DenormalsFlushAlike) {
  std::mt19937 rng(77);
  std::uniform_real_distribution<float> mantissa(-1.0f, 1.0f);
  auto spread = [&](int lo, int hi) { return std::ldexp(mantissa(rng), std::uniform_int_distribution<int>(lo, hi)(rng)); };
  auto weights = [&](int64_t rows, int64_t cols, int lo, int hi) {
    TestWeights w{DType::kBF16, rows, cols, std::vector<uint8_t>(rows * cols * 2), {}};
    for (int64_t i = 0; i < rows * cols; ++i) {
      const uint16_t h = F32ToBf16(spread(lo, hi));
      std::memcpy(w.bytes.data() + 2 * i, &h, 2);
    }
    return w;
  };
  auto activations = [&](int64_t n, int lo, int hi) {
    std::vector<float> x(n);
    for (float& v : x) v = spread(lo, hi);
    return x;
  };
  ThreadPool pool(2);
  for (int64_t cols : {33, 100}) {
    for (int64_t rows : {7, 100}) {
      const TestWeights w = weights(rows, cols, -135, 0), tiny = weights(rows, cols, -135, -120);
      for (int64_t num_tokens : {int64_t{1}, int64_t{5}, internal::kFloatPanelMinTokens + 7}) {
        const std::vector<float> x = activations(num_tokens * cols, -135, 0);
        std::vector<float> want(num_tokens * rows), got(num_tokens * rows);
        RunAt(Isa::kPortable, [&] { MatMul(w.matrix(), x.data(), num_tokens, want.data(), &pool); });
        RunAt(GetParam(), [&] { MatMul(w.matrix(), x.data(), num_tokens, got.data(), &pool); });
        ASSERT_TRUE(BitwiseEqual(want, got)) << "rows " << rows << " cols " << cols << " T " << num_tokens;
        const std::vector<float> huge = activations(num_tokens * cols, 100, 110);
        std::vector<int64_t> want_fixed(num_tokens * rows), got_fixed(num_tokens * rows);
        RunAt(Isa::kPortable, [&] { MatMulFixedPoint(tiny.matrix(), huge.data(), num_tokens, want_fixed.data(), &pool); });
        RunAt(GetParam(), [&] { MatMulFixedPoint(tiny.matrix(), huge.data(), num_tokens, got_fixed.data(), &pool); });
        ASSERT_TRUE(BitwiseEqual(want_fixed, got_fixed)) << "fixed point, rows " << rows << " cols " << cols << " T "
                                                         << num_tokens;
      }
    }
  }
}

// Quantised weights of random bytes: every packing and scale pattern (Q6_K's scale −128, Q3_K's
// high bits, Q2_K's minimums ...), through both reductions.
TEST_P(IsaEqualityTest, RandomBlockBytesEqualPortableBitwise) {
  std::mt19937 rng(31);
  ThreadPool pool(2);
  for (DType type : kSupportedDTypes) {
    if (!IsQuantized(type)) continue;
    const int64_t cols = FitCols(type, 512), rows = 7;
    for (int64_t num_tokens : {1, 3, 6}) {
      const testing::TestWeights w = testing::RandomBlockWeights(type, rows, cols, &rng);
      const std::vector<float> x = RandomActivations(num_tokens * cols, &rng);
      std::vector<float> want(num_tokens * rows), got(num_tokens * rows);
      std::vector<int64_t> want_fixed(num_tokens * rows), got_fixed(num_tokens * rows);
      RunAt(Isa::kPortable, [&] {
        MatMul(w.matrix(), x.data(), num_tokens, want.data(), &pool);
        MatMulFixedPoint(w.matrix(), x.data(), num_tokens, want_fixed.data(), &pool);
      });
      RunAt(GetParam(), [&] {
        MatMul(w.matrix(), x.data(), num_tokens, got.data(), &pool);
        MatMulFixedPoint(w.matrix(), x.data(), num_tokens, got_fixed.data(), &pool);
      });
      ASSERT_TRUE(BitwiseEqual(want, got)) << DTypeName(type) << " T " << num_tokens;
      ASSERT_TRUE(BitwiseEqual(want_fixed, got_fixed)) << DTypeName(type) << " T " << num_tokens;
      testing::ExpectMatchesFloat64Reference(w, x, num_tokens, want);
    }
  }
}

// A row's infinite scale spoils that row's output only: the decode stream (quant_row_stream_avx512.h)
// reads the bytes after a row's last blocks into its padding lanes.
TEST_P(IsaEqualityTest, InfiniteScaleStaysInItsRow) {
  std::mt19937 rng(5);
  ThreadPool pool(1);
  for (DType type : {DType::kQ8_0, DType::kQ4_0, DType::kQ4_1, DType::kQ5_0, DType::kQ5_1}) {
    const int64_t rows = 3, cols = 96;  // 3 blocks: one short of the stream's 4
    TestWeights w = MakeTestWeights(type, rows, cols, &rng);
    const uint16_t inf = F32ToFp16(INFINITY);
    std::memcpy(w.bytes.data() + DTypeRowBytes(type, cols), &inf, 2);  // row 1, block 0: d (its first field)
    const std::vector<float> x = RandomActivations(cols, &rng);
    std::vector<float> want(rows), got(rows);
    std::vector<int64_t> want_fixed(rows), got_fixed(rows);
    RunAt(Isa::kPortable, [&] {
      MatMul(w.matrix(), x.data(), 1, want.data(), &pool);
      MatMulFixedPoint(w.matrix(), x.data(), 1, want_fixed.data(), &pool);
    });
    RunAt(GetParam(), [&] {
      MatMul(w.matrix(), x.data(), 1, got.data(), &pool);
      MatMulFixedPoint(w.matrix(), x.data(), 1, got_fixed.data(), &pool);
    });
    for (int64_t r : {0, 2}) {
      EXPECT_EQ(std::memcmp(&want[r], &got[r], sizeof(float)), 0) << DTypeName(type) << " row " << r;
      EXPECT_EQ(want_fixed[r], got_fixed[r]) << DTypeName(type) << " row " << r;
    }
  }
}

TEST_P(IsaEqualityTest, MatMulFixedPointEqualsPortableBitwise) {
  std::mt19937 rng(77);
  ThreadPool pool(2);
  for (DType type : kSupportedDTypes) {
    // Float weights: 300 columns are 18 whole chunks and a partial one, 60 three and a partial one; 37 rows are
    // two of the decode path's groups of 16 rows and a part. Quantised: 3072 columns are long enough rows for
    // AVX-512's one-token row stream, 96 short ones for its sixteen-row quads.
    const std::vector<int64_t> cols_list =
        IsQuantized(type) ? FitCols(type, {96, 3072}) : std::vector<int64_t>{37, 60, 300};
    for (int64_t cols : cols_list) {
      for (int64_t rows : {13, 37}) {
        for (int64_t num_tokens : {int64_t{1}, int64_t{2}, int64_t{3}, int64_t{4}, int64_t{9},
                                   internal::kPanelMinTokens + 2, internal::kFloatPanelMinTokens + 2}) {
          const TestWeights w = MakeTestWeights(type, rows, cols, &rng);
          const std::vector<float> x = RandomActivations(num_tokens * cols, &rng);
          std::vector<int64_t> want(num_tokens * rows), got(num_tokens * rows);
          RunAt(Isa::kPortable, [&] { MatMulFixedPoint(w.matrix(), x.data(), num_tokens, want.data(), &pool); });
          RunAt(GetParam(), [&] { MatMulFixedPoint(w.matrix(), x.data(), num_tokens, got.data(), &pool); });
          ASSERT_TRUE(BitwiseEqual(want, got))
              << DTypeName(type) << " rows " << rows << " cols " << cols << " T " << num_tokens;
        }
      }
    }
  }
}

// The fixed-point rounding of exact ties (k/2 after the 2^32 scale): AVX-512's conversion, AVX2's
// magic-number addition and std::nearbyint must all round half to even.
TEST_P(IsaEqualityTest, FixedPointTiesRoundToEvenOnEveryLevel) {
  ThreadPool pool(1);
  const int64_t cols = 16;
  std::vector<float> ones(cols, 1.0f);
  TestWeights w{DType::kF32, 1, cols, std::vector<uint8_t>(cols * 4), ones};
  std::memcpy(w.bytes.data(), ones.data(), cols * 4);
  for (int k = -9; k <= 9; ++k) {
    std::vector<float> x(cols, 0.0f);
    x[0] = std::ldexp(static_cast<float>(k), -33);  // one term k/2 after scaling
    int64_t want = 0, got = 0;
    RunAt(Isa::kPortable, [&] { MatMulFixedPoint(w.matrix(), x.data(), 1, &want, &pool); });
    RunAt(GetParam(), [&] { MatMulFixedPoint(w.matrix(), x.data(), 1, &got, &pool); });
    EXPECT_EQ(want, static_cast<int64_t>(std::nearbyint(k / 2.0))) << k;
    EXPECT_EQ(got, want) << k;
  }
}

TEST_P(IsaEqualityTest, QuantizeActivationsEqualsPortableBitwise) {
  std::mt19937 rng(5);
  const int64_t n = 32 * 9;
  std::vector<float> x = RandomActivations(n, &rng);
  for (int j = 0; j < 32; ++j) x[32 + j] = 0.0f;                          // an all-zero block
  for (int j = 0; j < 32; ++j) x[64 + j] = (j - 16) * 0.5f;               // halves: rounding ties
  for (int j = 0; j < 32; ++j) x[96 + j] = j % 2 ? -0.0f : 1e-30f * j;    // signed zeros, tiny values
  for (int j = 0; j < 32; ++j) x[128 + j] = (j % 3 - 1) * 3.0e38f;        // near the f32 limit
  const auto& want_fn = internal::KernelsFor(Isa::kPortable).quantize_activation_row;
  const auto& got_fn = internal::KernelsFor(GetParam()).quantize_activation_row;
  std::vector<BlockQ8Act> want(n / 32), got(n / 32);
  want_fn(x.data(), n, want.data());
  got_fn(x.data(), n, got.data());
  ASSERT_EQ(std::memcmp(want.data(), got.data(), want.size() * sizeof(BlockQ8Act)), 0);
}

// Paged attention's q·k for every length up to 80 (head dims 64 and 80 and all their tails), over
// key rows at a stride, one query or several, each over its own range of the rows.
TEST_P(IsaEqualityTest, DotRowsEqualsPortableBitwise) {
  std::mt19937 rng(11);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  const auto want_fn = internal::KernelsFor(Isa::kPortable).dot_rows;
  const auto got_fn = internal::KernelsFor(GetParam()).dot_rows;
  // 3 rows (one at a time on every level), 7 (AVX-512's sixteen-row fold partly empty), 16, 35 and 44
  // (sixteen-row batches, then a tail of 3 one at a time, or of 12 in one partial batch); 1 query, 3, and 8
  // and 13 (AVX-512's transposed keys, four queries at a time and the rest).
  std::vector<int64_t> lengths = {128};  // every length to 80, and the 128-element head
  for (int64_t n = 0; n <= 80; ++n) lengths.push_back(n);
  for (int64_t rows : {3, 7, 16, 35, 44}) {
    for (int64_t num_queries : {1, 3, 8, 13}) {
      for (int64_t n : lengths) {
        for (int rep = 0; rep < 4; ++rep) {
          const int64_t stride = n + 3;
          std::vector<float> q(num_queries * n), k(rows * stride);
          for (float& v : q) v = dist(rng);
          for (float& v : k) v = rep == 0 ? -0.0f : dist(rng);  // rep 0: every product a signed zero
          if (rep == 1 && n > 0) k[(rows / 2) * stride] = NAN;    // one row's sum a NaN
          std::vector<float> want(num_queries * rows, 7.0f), got = want;
          std::vector<internal::QueryScores> want_q, got_q;
          for (int64_t j = 0; j < num_queries; ++j) {
            // Query 0 all the rows, the others a random range (a prefill's last block of keys).
            const int64_t lo = j == 0 ? 0 : static_cast<int64_t>(rng() % rows);
            const int64_t hi = j == 0 ? rows : lo + 1 + static_cast<int64_t>(rng() % (rows - lo));
            want_q.push_back({q.data() + j * n, want.data() + j * rows, lo, hi});
            got_q.push_back({q.data() + j * n, got.data() + j * rows, lo, hi});
          }
          want_fn(want_q.data(), num_queries, k.data(), stride, n);
          got_fn(got_q.data(), num_queries, k.data(), stride, n);
          ASSERT_TRUE(BitwiseEqual(want, got))
              << rows << " rows, " << num_queries << " queries, n " << n << " rep " << rep;
        }
      }
    }
  }
}

// KV cache rows of random bytes (every f16/bf16 pattern: subnormals, infinities, NaNs; q8_0 scales of
// any value) and lengths around the 8-lane width.
TEST_P(IsaEqualityTest, DequantizeKvRowEqualsPortableBitwise) {
  std::mt19937 rng(12);
  const auto want_fn = internal::KernelsFor(Isa::kPortable).dequantize_kv_row;
  const auto got_fn = internal::KernelsFor(GetParam()).dequantize_kv_row;
  for (DType type : {DType::kF32, DType::kF16, DType::kBF16, DType::kQ8_0}) {
    for (int64_t n : {32, 64, 96, 128, 256}) {
      for (int rep = 0; rep < 50; ++rep) {
        std::vector<uint8_t> bytes(DTypeRowBytes(type, n));
        for (uint8_t& b : bytes) b = static_cast<uint8_t>(rng());
        std::vector<float> want(n), got(n);
        want_fn(type, bytes.data(), n, want.data());
        got_fn(type, bytes.data(), n, got.data());
        ASSERT_TRUE(BitwiseEqual(want, got)) << DTypeName(type) << " n " << n << " rep " << rep;
      }
    }
  }
}

// Attention scores of every length up to 40 (the 4-lane tails), spread to reach exp's clamps, with
// masked (-inf) keys, a NaN, and a row where every key is masked.
std::vector<float> RandomScores(int64_t n, int rep, std::mt19937* rng) {
  std::normal_distribution<float> dist(0.0f, rep % 2 ? 200.0f : 4.0f);
  std::vector<float> s(n);
  for (float& v : s) v = dist(*rng);
  if (rep == 2 && n > 0) s[n / 2] = -INFINITY;
  if (rep == 3 && n > 0) s[n - 1] = NAN;
  if (rep == 4) std::fill(s.begin(), s.end(), -INFINITY);
  return s;
}

TEST_P(IsaEqualityTest, ExpScoresEqualsPortableBitwise) {
  std::mt19937 rng(13);
  const auto want_fn = internal::KernelsFor(Isa::kPortable).exp_scores;
  const auto got_fn = internal::KernelsFor(GetParam()).exp_scores;
  // One row, 3, 7 and 19 rows, each row its own draw; the rows n long, or n + r (a prefill's tokens, each
  // attending one key more), so that every length's tail of the level's lanes is met.
  for (int64_t rows : {1, 3, 7, 19}) {
    for (bool growing : {false, true}) {
      for (int64_t n = 0; n <= 40; ++n) {
        for (int rep = 0; rep < 10; ++rep) {
          std::vector<float> want;
          std::vector<int64_t> lengths;
          for (int64_t r = 0; r < rows; ++r) {
            lengths.push_back(growing ? n + r : n);
            const std::vector<float> row = RandomScores(lengths.back(), (rep + static_cast<int>(r)) % 20, &rng);
            want.insert(want.end(), row.begin(), row.end());
          }
          std::vector<float> got = want, want_sums(rows), got_sums(rows);
          want_fn(want.data(), lengths.data(), rows, 0.125f, want_sums.data());
          got_fn(got.data(), lengths.data(), rows, 0.125f, got_sums.data());
          ASSERT_TRUE(BitwiseEqual(want, got)) << rows << " rows, n " << n << " rep " << rep;
          ASSERT_TRUE(BitwiseEqual(want_sums, got_sums)) << rows << " rows, n " << n << " rep " << rep;
        }
      }
    }
  }
}

// Value rows at a stride, lengths around the 8-, 16- and 64-lane chunks, weights of any size, 1 to 9
// outputs (around the 4- and 8-output groups).
TEST_P(IsaEqualityTest, AccumulateRowsEqualsPortableBitwise) {
  std::mt19937 rng(14);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  const auto want_fn = internal::KernelsFor(Isa::kPortable).accumulate_rows;
  const auto got_fn = internal::KernelsFor(GetParam()).accumulate_rows;
  for (int64_t n : {1, 7, 8, 9, 31, 32, 33, 64, 80, 128, 200}) {
    for (int64_t rows : {1, 3, 16}) {
      for (int64_t outputs : {1, 3, 4, 5, 9}) {
        const int64_t stride = n + 5;
        std::vector<float> w(outputs * rows), v(rows * stride), want(outputs * n);
        for (float& x : w) x = dist(rng) * 1e-3f;
        for (float& x : v) x = dist(rng);
        for (float& x : want) x = dist(rng);
        std::vector<float> got = want;
        std::vector<const float*> w_rows;
        std::vector<float*> want_rows, got_rows;
        for (int64_t o = 0; o < outputs; ++o) {
          w_rows.push_back(w.data() + o * rows);
          want_rows.push_back(want.data() + o * n);
          got_rows.push_back(got.data() + o * n);
        }
        want_fn(w_rows.data(), outputs, v.data(), stride, rows, n, want_rows.data());
        got_fn(w_rows.data(), outputs, v.data(), stride, rows, n, got_rows.data());
        ASSERT_TRUE(BitwiseEqual(want, got)) << "n " << n << " rows " << rows << " outputs " << outputs;
      }
    }
  }
}

// The FFN's gated activations over lengths around the 4-lane width (the tails), gates spread past exp's
// clamps, with ±inf and NaN gates and ups.
std::vector<float> RandomGates(int64_t n, int rep, std::mt19937* rng) {
  std::normal_distribution<float> dist(0.0f, rep % 2 ? 60.0f : 3.0f);
  std::vector<float> g(n);
  for (float& v : g) v = dist(*rng);
  if (rep == 2 && n > 0) g[n / 2] = INFINITY;
  if (rep == 3 && n > 0) g[n - 1] = -INFINITY;
  if (rep == 4 && n > 0) g[0] = NAN;
  return g;
}

TEST_P(IsaEqualityTest, GatedActivationsEqualPortableBitwise) {
  std::mt19937 rng(16);
  const internal::IsaKernels& want_k = internal::KernelsFor(Isa::kPortable);
  const internal::IsaKernels& got_k = internal::KernelsFor(GetParam());
  for (int64_t n = 0; n <= 40; ++n) {
    for (int rep = 0; rep < 10; ++rep) {
      const std::vector<float> gate = RandomGates(n, rep, &rng), up = RandomGates(n, rep + 1, &rng);
      std::vector<float> want(n), got(n);
      want_k.silu_mul(gate.data(), up.data(), n, want.data());
      got_k.silu_mul(gate.data(), up.data(), n, got.data());
      ASSERT_TRUE(BitwiseEqual(want, got)) << "silu n " << n << " rep " << rep;
      want_k.gelu_tanh_mul(gate.data(), up.data(), n, want.data());
      got_k.gelu_tanh_mul(gate.data(), up.data(), n, got.data());
      ASSERT_TRUE(BitwiseEqual(want, got)) << "gelu-tanh n " << n << " rep " << rep;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Levels, IsaEqualityTest, ::testing::Values(Isa::kAvx2, Isa::kAvx512, Isa::kAvx512Bf16),
                         [](const ::testing::TestParamInfo<Isa>& info) { return std::string(IsaName(info.param)); });

TEST(IsaSettingTest, NamesLevelsAndRefusesWhatCannotRun) {
  EXPECT_EQ(*IsaFromSetting("portable"), Isa::kPortable);
  EXPECT_EQ(*IsaFromSetting(nullptr), BestIsa());
  EXPECT_EQ(*IsaFromSetting(""), BestIsa());
  const StatusOr<Isa> bogus = IsaFromSetting("sse9");
  ASSERT_FALSE(bogus.ok());
  EXPECT_EQ(bogus.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bogus.status().message().find("portable, avx2, avx512 or avx512bf16"), std::string::npos);
  for (Isa isa : {Isa::kAvx2, Isa::kAvx512, Isa::kAvx512Bf16}) {
    EXPECT_EQ(IsaFromSetting(IsaName(isa)).ok(), IsaCompiledIn(isa) && CpuSupportsIsa(isa)) << IsaName(isa);
  }
}

// The portable level's exp_scores is PortableExpF written out: the same bits as the shared function,
// each row's sum in 16 lanes (lane l: positions l, l + 16, ... in order) folded as Fold16 (rows of
// different lengths).
TEST(ExpScoresTest, PortableLevelIsPortableExpFOfTheScaledScoreMinusTheMax) {
  std::mt19937 rng(15);
  const auto fn = internal::KernelsFor(Isa::kPortable).exp_scores;
  constexpr int64_t kRows = 11;
  for (int rep = 0; rep < 4; ++rep) {
    std::vector<float> s, want_sums(kRows), sums(kRows);
    std::vector<int64_t> lengths;
    for (int64_t r = 0; r < kRows; ++r) {
      lengths.push_back(30 + 3 * r % 7);
      const std::vector<float> row = RandomScores(lengths.back(), (rep + static_cast<int>(r)) % 5, &rng);
      s.insert(s.end(), row.begin(), row.end());
    }
    std::vector<float> want = s;
    float* row = want.data();
    for (int64_t r = 0; r < kRows; row += lengths[r], ++r) {
      float max = -INFINITY;
      for (int64_t j = 0; j < lengths[r]; ++j) max = std::fmax(max, row[j] *= 0.125f);
      float lane[16] = {};
      for (int64_t j = 0; j < lengths[r]; ++j) lane[j % 16] += (row[j] = PortableExpF(row[j] - max));
      float b[8], q[4];
      for (int i = 0; i < 8; ++i) b[i] = lane[i] + lane[i + 8];
      for (int i = 0; i < 4; ++i) q[i] = b[i] + b[i + 4];
      want_sums[r] = (q[0] + q[2]) + (q[1] + q[3]);
    }
    fn(s.data(), lengths.data(), kRows, 0.125f, sums.data());
    ASSERT_TRUE(BitwiseEqual(want, s)) << "rep " << rep;
    ASSERT_TRUE(BitwiseEqual(want_sums, sums)) << "rep " << rep;
  }
}

// The portable level's gated activations are the formulas with the shared PortableExpF.
TEST(GatedActivationsTest, PortableLevelIsTheFormulaWithPortableExpF) {
  std::mt19937 rng(17);
  const internal::IsaKernels& portable = internal::KernelsFor(Isa::kPortable);
  for (int rep = 0; rep < 6; ++rep) {
    const int64_t n = 37;
    const std::vector<float> gate = RandomGates(n, rep, &rng), up = RandomGates(n, rep + 2, &rng);
    std::vector<float> silu(n), gelu(n), want_silu(n), want_gelu(n);
    portable.silu_mul(gate.data(), up.data(), n, silu.data());
    portable.gelu_tanh_mul(gate.data(), up.data(), n, gelu.data());
    for (int64_t i = 0; i < n; ++i) {
      const float g = gate[i];
      want_silu[i] = g / (1.0f + PortableExpF(-g)) * up[i];
      const float u = 0.7978845608028654f * (g + 0.044715f * g * g * g);
      want_gelu[i] = g / (1.0f + PortableExpF(-2.0f * u)) * up[i];
    }
    EXPECT_TRUE(BitwiseEqual(want_silu, silu)) << "rep " << rep;
    EXPECT_TRUE(BitwiseEqual(want_gelu, gelu)) << "rep " << rep;
  }
}

}  // namespace
}  // namespace tpserve
