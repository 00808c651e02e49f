// RmsNorm, ApplyRope, SiluMul, GeluTanhMul, Softmax, EmbeddingLookup and WriteKvCache against float64 loops.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "common/dtype.h"
#include "kernels/cpu/embedding.h"
#include "kernels/cpu/gelu_tanh_mul.h"
#include "kernels/cpu/paged_attention.h"
#include "kernels/cpu/rms_norm.h"
#include "kernels/cpu/rope.h"
#include "kernels/cpu/silu_mul.h"
#include "kernels/cpu/softmax.h"

namespace tpserve {
namespace {

std::vector<float> Random(int64_t n, std::mt19937* rng, float stddev = 1.0f) {
  std::normal_distribution<float> dist(0.0f, stddev);
  std::vector<float> v(n);
  for (float& x : v) x = dist(*rng);
  return v;
}

TEST(RmsNormTest, MatchesFloat64AndMayAlias) {
  std::mt19937 rng(1);
  for (int64_t dim : {1, 7, 64, 576, 4096}) {
    const int64_t T = 3;
    const std::vector<float> x = Random(T * dim, &rng, 3.0f), weight = Random(dim, &rng);
    std::vector<float> out(T * dim);
    RmsNorm(x.data(), weight.data(), T, dim, 1e-5f, out.data());
    for (int64_t t = 0; t < T; ++t) {
      double ss = 0;
      for (int64_t i = 0; i < dim; ++i) ss += static_cast<double>(x[t * dim + i]) * x[t * dim + i];
      const double inv = 1.0 / std::sqrt(ss / dim + 1e-5);
      for (int64_t i = 0; i < dim; ++i) {
        const double want = x[t * dim + i] * inv * weight[i];
        ASSERT_NEAR(out[t * dim + i], want, 1e-5 * std::fabs(want) + 1e-7) << dim << " " << t << " " << i;
      }
    }
    std::vector<float> in_place = x;
    RmsNorm(in_place.data(), weight.data(), T, dim, 1e-5f, in_place.data());
    EXPECT_EQ(in_place, out);
  }
}

TEST(RopeTest, BothLayoutsMatchFloat64Rotation) {
  std::mt19937 rng(2);
  const int64_t T = 5, H = 3, D = 64;
  std::vector<float> inv_freq(D / 2);
  for (int64_t i = 0; i < D / 2; ++i) inv_freq[i] = static_cast<float>(std::pow(10000.0, -2.0 * i / D));
  const std::vector<int32_t> positions = {0, 1, 17, 4095, 100000};
  for (RopeLayout layout : {RopeLayout::kInterleaved, RopeLayout::kHalf}) {
    const std::vector<float> x = Random(T * H * D, &rng);
    std::vector<float> y = x;
    ApplyRope(y.data(), positions.data(), T, H, D, inv_freq.data(), layout);
    for (int64_t t = 0; t < T; ++t) {
      for (int64_t h = 0; h < H; ++h) {
        const float* xv = x.data() + (t * H + h) * D;
        const float* yv = y.data() + (t * H + h) * D;
        for (int64_t i = 0; i < D / 2; ++i) {
          const int64_t a = layout == RopeLayout::kInterleaved ? 2 * i : i;
          const int64_t b = layout == RopeLayout::kInterleaved ? 2 * i + 1 : i + D / 2;
          const double angle = static_cast<double>(positions[t]) * inv_freq[i];
          const double ya = xv[a] * std::cos(angle) - xv[b] * std::sin(angle);
          const double yb = xv[a] * std::sin(angle) + xv[b] * std::cos(angle);
          ASSERT_NEAR(yv[a], ya, 2e-6 * (std::fabs(xv[a]) + std::fabs(xv[b]))) << t << " " << h << " " << i;
          ASSERT_NEAR(yv[b], yb, 2e-6 * (std::fabs(xv[a]) + std::fabs(xv[b]))) << t << " " << h << " " << i;
        }
      }
    }
  }
  // Position 0 is the identity.
  std::vector<float> x = Random(H * D, &rng), y = x;
  const int32_t zero = 0;
  ApplyRope(y.data(), &zero, 1, H, D, inv_freq.data(), RopeLayout::kHalf);
  EXPECT_EQ(x, y);
}

TEST(SiluMulTest, MatchesFloat64) {
  std::mt19937 rng(3);
  const int64_t n = 1537;
  const std::vector<float> gate = Random(n, &rng, 4.0f), up = Random(n, &rng);
  std::vector<float> out(n);
  SiluMul(gate.data(), up.data(), n, out.data());
  for (int64_t i = 0; i < n; ++i) {
    const double g = gate[i];
    const double want = g / (1.0 + std::exp(-g)) * up[i];
    ASSERT_NEAR(out[i], want, 1e-6 * std::fabs(want) + 1e-7) << i;
  }
  std::vector<float> alias = gate;
  SiluMul(alias.data(), up.data(), n, alias.data());
  EXPECT_EQ(alias, out);
}

// Against the tanh form itself (the kernel uses the equivalent sigmoid form), over large inputs too.
TEST(GeluTanhMulTest, MatchesFloat64) {
  std::mt19937 rng(5);
  const int64_t n = 1537;
  std::vector<float> gate = Random(n, &rng, 6.0f);
  gate[0] = 40.0f;
  gate[1] = -40.0f;
  const std::vector<float> up = Random(n, &rng);
  std::vector<float> out(n);
  GeluTanhMul(gate.data(), up.data(), n, out.data());
  for (int64_t i = 0; i < n; ++i) {
    const double g = gate[i];
    const double want = 0.5 * g * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (g + 0.044715 * g * g * g))) * up[i];
    ASSERT_NEAR(out[i], want, 2e-6 * std::fabs(g * up[i]) + 1e-7) << i << " gate " << g;
  }
  std::vector<float> alias = gate;
  GeluTanhMul(alias.data(), up.data(), n, alias.data());
  EXPECT_EQ(alias, out);
}

TEST(SoftmaxTest, MatchesFloat64AndSurvivesLargeLogits) {
  std::mt19937 rng(4);
  for (int64_t n : {1, 5, 49152}) {
    std::vector<float> x = Random(n, &rng, 10.0f);
    x[0] = 1000.0f;  // would overflow a naive exp
    std::vector<float> y = x;
    Softmax(y.data(), n);
    double max = -INFINITY, sum = 0;
    for (float v : x) max = std::fmax(max, v);
    for (float v : x) sum += std::exp(v - max);
    for (int64_t i = 0; i < n; ++i) {
      const double want = std::exp(x[i] - max) / sum;
      ASSERT_NEAR(y[i], want, 1e-6 * want + 1e-12) << n << " " << i;
    }
  }
}

TEST(EmbeddingTest, VocabParallelShardZeroesForeignIds) {
  std::mt19937 rng(5);
  const int64_t cols = 64, shard_rows = 10, vocab_begin = 20;
  for (DType type : {DType::kF32, DType::kF16, DType::kBF16, DType::kQ8_0, DType::kQ4_0, DType::kQ4_1}) {
    const std::vector<float> src = Random(shard_rows * cols, &rng);
    const int64_t row_bytes = DTypeRowBytes(type, cols);
    std::vector<uint8_t> bytes(shard_rows * row_bytes);
    std::vector<float> want_rows(shard_rows * cols);
    for (int64_t r = 0; r < shard_rows; ++r) {
      QuantizeRow(type, src.data() + r * cols, bytes.data() + r * row_bytes, cols);
      DequantizeRow(type, bytes.data() + r * row_bytes, want_rows.data() + r * cols, cols);
    }
    const WeightMatrix table{type, shard_rows, cols, bytes.data()};
    const std::vector<int32_t> ids = {19, 20, 29, 30, 25, 0};
    std::vector<float> out(ids.size() * cols, NAN);
    EmbeddingLookup(table, vocab_begin, ids.data(), static_cast<int64_t>(ids.size()), out.data());
    for (size_t t = 0; t < ids.size(); ++t) {
      const bool inside = ids[t] >= vocab_begin && ids[t] < vocab_begin + shard_rows;
      for (int64_t c = 0; c < cols; ++c) {
        const float want = inside ? want_rows[(ids[t] - vocab_begin) * cols + c] : 0.0f;
        ASSERT_EQ(out[t * cols + c], want) << DTypeName(type) << " id " << ids[t] << " col " << c;
      }
    }
  }
}

TEST(WriteKvCacheTest, StoresEachTokenAtItsSlotAndSkipsNegativeSlots) {
  std::mt19937 rng(6);
  const int64_t Hkv = 3, D = 8, num_slots = 12, T = 4;
  const std::vector<float> k = Random(T * Hkv * D, &rng), v = Random(T * Hkv * D, &rng);
  std::vector<float> k_cache(num_slots * Hkv * D, -1.0f), v_cache(num_slots * Hkv * D, -1.0f);
  const std::vector<int32_t> slots = {11, 0, -1, 5};
  WriteKvCache(k.data(), v.data(), slots.data(), T, Hkv, D, k_cache.data(), v_cache.data());
  for (int64_t s = 0; s < num_slots; ++s) {
    int64_t src = -1;
    for (int64_t t = 0; t < T; ++t)
      if (slots[t] == s) src = t;
    for (int64_t i = 0; i < Hkv * D; ++i) {
      ASSERT_EQ(k_cache[s * Hkv * D + i], src < 0 ? -1.0f : k[src * Hkv * D + i]) << s;
      ASSERT_EQ(v_cache[s * Hkv * D + i], src < 0 ? -1.0f : v[src * Hkv * D + i]) << s;
    }
  }
}

}  // namespace
}  // namespace tpserve
