#include "kvstore/kv_pool.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

namespace tpserve {
namespace {

float* Keys(KvPool& pool, int64_t layer) { return static_cast<float*>(pool.KeyCache(layer)); }
float* Values(KvPool& pool, int64_t layer) { return static_cast<float*>(pool.ValueCache(layer)); }

TEST(KvPoolTest, BlocksForBudgetDividesByTheBytesOfOneBlockAcrossLayers) {
  // 30 layers × K,V × 16 tokens × 3 heads × 64 dims × 4 bytes = 737280 bytes per block.
  EXPECT_EQ(KvPool::BlockBytes(30, 3, 64, 16), 737280);
  EXPECT_EQ(KvPool::BlocksForBudget(737280 * 10 + 737279, 30, 3, 64), 10);
  EXPECT_EQ(KvPool::BlocksForBudget(737279, 30, 3, 64), 0);
  EXPECT_EQ(KvPool::BlocksForBudget(0, 30, 3, 64), 0);
  EXPECT_EQ(KvPool::BlocksForBudget(1 << 20, 2, 1, 8, 32), (1 << 20) / (2 * 2 * 32 * 8 * 4));
}

TEST(KvPoolTest, ElementTypesSetTheBytesOfARow) {
  // D = 64: f32 256 bytes, f16 and bf16 128, q8_0 two blocks of 34 (32 int8 and an f16 scale) = 68.
  EXPECT_EQ(KvPool::RowBytes(64, DType::kF32), 256);
  EXPECT_EQ(KvPool::RowBytes(64, DType::kF16), 128);
  EXPECT_EQ(KvPool::RowBytes(64, DType::kBF16), 128);
  EXPECT_EQ(KvPool::RowBytes(64, DType::kQ8_0), 68);
  EXPECT_EQ(KvPool::BlockBytes(30, 3, 64, 16, DType::kQ8_0), 30 * 2 * 16 * 3 * 68);
  EXPECT_EQ(KvPool::BlocksForBudget(737280, 30, 3, 64, 16, DType::kF16), 2);
  EXPECT_EQ(KvPool::BlocksForBudget(1 << 20, 2, 1, 48, 16, DType::kQ8_0), 0);  // 48 is not whole blocks
  auto pool = KvPool::Create({2, 3, 64, 16, 10, DType::kQ8_0});
  ASSERT_TRUE(pool.ok()) << pool.status().ToString();
  EXPECT_EQ((*pool)->total_bytes(), 10 * KvPool::BlockBytes(2, 3, 64, 16, DType::kQ8_0));
  EXPECT_EQ(static_cast<uint8_t*>((*pool)->ValueCache(0)) - static_cast<uint8_t*>((*pool)->KeyCache(0)),
            10 * 16 * 3 * 68);
  auto odd = KvPool::Create({2, 3, 48, 16, 10, DType::kQ8_0});
  EXPECT_EQ(odd.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(odd.status().message().find("multiple"), std::string::npos) << odd.status().ToString();
  auto q4 = KvPool::Create({2, 3, 64, 16, 10, DType::kQ4_0});
  EXPECT_EQ(q4.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(q4.status().message().find("supported: f32, f16, bf16, q8_0"), std::string::npos);
}

TEST(KvPoolTest, CreateRejectsBadShapes) {
  EXPECT_EQ(KvPool::Create({0, 3, 64, 16, 10}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(KvPool::Create({2, 3, 64, 0, 10}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(KvPool::Create({2, 3, 64, 16, 0}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(KvPool::Create({2, 3, 64, 16, int64_t{1} << 60}).status().code(), StatusCode::kResourceExhausted);
}

TEST(KvPoolTest, LayersAreDisjointAlignedAndZeroed) {
  auto pool_or = KvPool::Create({3, 2, 8, 4, 5});
  ASSERT_TRUE(pool_or.ok()) << pool_or.status().ToString();
  KvPool& pool = **pool_or;
  const int64_t layer_floats = 5 * 4 * 2 * 8;
  EXPECT_EQ(pool.total_bytes(), 3 * 2 * layer_floats * 4);
  EXPECT_EQ(pool.num_slots(), 20);
  for (int64_t l = 0; l < 3; ++l) {
    EXPECT_EQ(reinterpret_cast<uintptr_t>(pool.KeyCache(l)) % 64, 0u);
    EXPECT_EQ(Values(pool, l) - Keys(pool, l), layer_floats);
    if (l > 0) {
      EXPECT_EQ(Keys(pool, l) - Values(pool, l - 1), layer_floats);
    }
    for (int64_t i = 0; i < layer_floats; ++i) {
      ASSERT_EQ(Keys(pool, l)[i], 0.0f);
      ASSERT_EQ(Values(pool, l)[i], 0.0f);
    }
  }
}

TEST(KvPoolTest, CopyBlockCopiesEveryLayerKeyAndValueAndNothingElse) {
  auto pool_or = KvPool::Create({2, 3, 4, 2, 4});
  ASSERT_TRUE(pool_or.ok());
  KvPool& pool = **pool_or;
  const int64_t block_floats = 2 * 3 * 4, layer_floats = 4 * block_floats;
  for (int64_t l = 0; l < 2; ++l)
    for (int64_t i = 0; i < layer_floats; ++i) {
      Keys(pool, l)[i] = static_cast<float>(1000 * l + i);
      Values(pool, l)[i] = static_cast<float>(-1000 * l - i);
    }
  ASSERT_TRUE(pool.CopyBlock(1, 3).ok());
  for (int64_t l = 0; l < 2; ++l)
    for (int64_t b = 0; b < 4; ++b)
      for (int64_t i = 0; i < block_floats; ++i) {
        const int64_t src = (b == 3 ? 1 : b) * block_floats + i;
        ASSERT_EQ(Keys(pool, l)[b * block_floats + i], static_cast<float>(1000 * l + src));
        ASSERT_EQ(Values(pool, l)[b * block_floats + i], static_cast<float>(-1000 * l - src));
      }
  EXPECT_EQ(pool.CopyBlock(4, 0).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(pool.CopyBlock(0, -1).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(pool.CopyBlock(2, 2).ok());
}

}  // namespace
}  // namespace tpserve
