// RowParallelLinear: the all-reduced output is bitwise the same at every TP degree and column split,
// TP 1 included (fixed-point partial sums, kernels/cpu/matmul_fixed_point.h), on every rank; and an
// input outside the exact range on one rank makes every rank take the f32 path for that step.
#include "worker/parallel_linear.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "tests/testing/memory_weight_source.h"
#include "tests/testing/thread_communicator.h"

namespace tpserve {
namespace {

using testing::MemoryWeightSource;
using testing::ThreadGroup;

constexpr int64_t kOut = 37, kIn = 320, kTokens = 3;
constexpr float kHuge = 1e9f;

std::vector<float> Random(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

struct RankResult {
  Status status;
  std::vector<float> y;  // [T, kOut]
};

// Rank r of a ThreadGroup holds columns [bounds[r], bounds[r + 1]) and runs Forward on its part of
// x [T, kIn]; `bad_rank` (if any) gets a first input far outside the fixed-point range.
std::vector<RankResult> RunSplit(const MemoryWeightSource& weights, const std::vector<int64_t>& bounds,
                                 const std::vector<float>& x, int bad_rank = -1, int64_t in = kIn) {
  const int tp = static_cast<int>(bounds.size()) - 1;
  std::vector<RankResult> results(tp);
  ThreadGroup group(tp);
  group.Run([&](Communicator& comm) {
    const int r = comm.rank();
    StatusOr<RowParallelLinear> layer = RowParallelLinear::Load(weights, "w", kOut, in, bounds[r], bounds[r + 1]);
    ASSERT_TRUE(layer.ok()) << layer.status().ToString();
    std::vector<float> mine;  // [T, in_shard]
    for (int64_t t = 0; t < kTokens; ++t) {
      mine.insert(mine.end(), x.begin() + t * in + bounds[r], x.begin() + t * in + bounds[r + 1]);
    }
    if (r == bad_rank) mine[0] = kHuge;
    ThreadPool pool(1);
    results[r].y.assign(kTokens * kOut, NAN);
    results[r].status = layer->Forward(mine.data(), kTokens, results[r].y.data(), &pool, comm);
  });
  return results;
}

TEST(RowParallelLinearTest, EveryTpDegreeAndSplitGivesTheSameBitsOnEveryRank) {
  const std::vector<float> x = Random(kTokens * kIn, 3);
  for (DType type : {DType::kF32, DType::kBF16, DType::kQ8_0, DType::kQ4_0, DType::kQ4_1}) {
    MemoryWeightSource weights;
    weights.Add("w", type, {kOut, kIn}, Random(kOut * kIn, 11));
    const std::vector<RankResult> single = RunSplit(weights, {0, kIn}, x);
    ASSERT_TRUE(single[0].status.ok()) << single[0].status.ToString();
    // Splits at 32-column blocks, uneven, one with a rank holding no columns; float weights also at 16.
    std::vector<std::vector<int64_t>> splits = {{0, 160, kIn}, {0, 64, 96, kIn}, {0, 32, 64, 256, kIn}, {0, 0, kIn}};
    if (!IsQuantized(type)) splits.push_back({0, 16, 208, kIn});
    for (const std::vector<int64_t>& bounds : splits) {
      const std::vector<RankResult> group = RunSplit(weights, bounds, x);
      for (size_t r = 0; r < group.size(); ++r) {
        ASSERT_TRUE(group[r].status.ok()) << group[r].status.ToString();
        EXPECT_EQ(0, std::memcmp(group[r].y.data(), single[0].y.data(), single[0].y.size() * sizeof(float)))
            << DTypeName(type) << ": rank " << r << " of a " << group.size() << "-way split at " << bounds[1];
      }
    }
  }
}

// K-quants split only at their 256-value super-blocks, and there every split gives the same bits; a
// bound inside a super-block is refused when the slice is read.
TEST(RowParallelLinearTest, KQuantsSplitOnSuperBlocksGiveTheSameBits) {
  constexpr int64_t kKIn = 768;
  const std::vector<float> x = Random(kTokens * kKIn, 4);
  for (DType type : {DType::kQ2_K, DType::kQ3_K, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K}) {
    MemoryWeightSource weights;
    weights.Add("w", type, {kOut, kKIn}, Random(kOut * kKIn, 12));
    const std::vector<RankResult> single = RunSplit(weights, {0, kKIn}, x, -1, kKIn);
    ASSERT_TRUE(single[0].status.ok()) << single[0].status.ToString();
    for (const std::vector<int64_t>& bounds : std::vector<std::vector<int64_t>>{{0, 256, kKIn}, {0, 256, 512, kKIn}, {0, 0, kKIn}}) {
      const std::vector<RankResult> group = RunSplit(weights, bounds, x, -1, kKIn);
      for (size_t r = 0; r < group.size(); ++r) {
        ASSERT_TRUE(group[r].status.ok()) << group[r].status.ToString();
        EXPECT_EQ(0, std::memcmp(group[r].y.data(), single[0].y.data(), single[0].y.size() * sizeof(float)))
            << DTypeName(type) << ": rank " << r << " of a " << group.size() << "-way split at " << bounds[1];
      }
    }
    StatusOr<RowParallelLinear> inside = RowParallelLinear::Load(weights, "w", kOut, kKIn, 0, 128);
    ASSERT_FALSE(inside.ok()) << DTypeName(type);
    EXPECT_EQ(inside.status().code(), StatusCode::kInvalidArgument);
  }
}

TEST(RowParallelLinearTest, InputOutOfRangeOnOneRankSumsTheStepInFloatOnEveryRank) {
  MemoryWeightSource weights;
  weights.Add("w", DType::kQ4_1, {kOut, kIn}, Random(kOut * kIn, 5));
  std::vector<float> x = Random(kTokens * kIn, 6);
  const std::vector<RankResult> group = RunSplit(weights, {0, 128, kIn}, x, /*bad_rank=*/1);
  x[128] = kHuge;  // the same input, whole, on one rank
  const std::vector<RankResult> single = RunSplit(weights, {0, kIn}, x);
  ASSERT_TRUE(single[0].status.ok()) << single[0].status.ToString();
  for (const RankResult& result : group) {
    ASSERT_TRUE(result.status.ok()) << result.status.ToString();
    EXPECT_EQ(0, std::memcmp(result.y.data(), group[0].y.data(), result.y.size() * sizeof(float)));
    for (size_t i = 0; i < result.y.size(); ++i) {
      ASSERT_TRUE(std::isfinite(result.y[i]));
      EXPECT_NEAR(result.y[i], single[0].y[i], 1e-5 * std::fabs(single[0].y[i]) + 1e-2) << i;
    }
  }
  // The huge input dominates token 0's outputs: they are far outside the exact range, not zeros.
  EXPECT_GT(std::fabs(group[0].y[0]), 1e5f);
}

}  // namespace
}  // namespace tpserve
