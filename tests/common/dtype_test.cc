#include "common/dtype.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

namespace tpserve {
namespace {

TEST(DTypeTest, HalfConversionsRoundTripRepresentableValues) {
  for (float v : {0.0f, 1.0f, -2.5f, 65504.0f, 6.103515625e-05f, 5.960464477539063e-08f}) {
    EXPECT_EQ(Fp16ToF32(F32ToFp16(v)), v) << v;
  }
  EXPECT_EQ(F32ToFp16(1.0f), 0x3c00);
  EXPECT_EQ(F32ToBf16(1.0f), 0x3f80);
  EXPECT_EQ(Bf16ToF32(0xc000), -2.0f);
}

TEST(DTypeTest, Q8_0BlockByHand) {
  BlockQ8_0 b{};
  b.d = F32ToFp16(0.5f);
  for (int i = 0; i < 32; ++i) b.qs[i] = static_cast<int8_t>(i - 16);
  std::vector<float> out(32);
  DequantizeRow(DType::kQ8_0, &b, out.data(), 32);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(out[i], 0.5f * (i - 16));
}

TEST(DTypeTest, Q4_0AndQ4_1NibbleOrderByHand) {
  BlockQ4_0 a{};
  a.d = F32ToFp16(2.0f);
  a.qs[0] = 0x3A;  // element 0: low nibble 10 → 2*(10-8)=4; element 16: high nibble 3 → 2*(3-8)=-10
  BlockQ4_1 b{};
  b.d = F32ToFp16(0.25f);
  b.m = F32ToFp16(-1.0f);
  b.qs[1] = 0xF1;  // element 1: 1 → -0.75; element 17: 15 → 2.75
  std::vector<float> out(32);
  DequantizeRow(DType::kQ4_0, &a, out.data(), 32);
  EXPECT_EQ(out[0], 4.0f);
  EXPECT_EQ(out[16], -10.0f);
  EXPECT_EQ(out[1], -16.0f);  // nibble 0
  DequantizeRow(DType::kQ4_1, &b, out.data(), 32);
  EXPECT_EQ(out[1], -0.75f);
  EXPECT_EQ(out[17], 2.75f);
  EXPECT_EQ(out[0], -1.0f);
}

TEST(DTypeTest, QuantizeDequantizeErrorIsBoundedByTheGrid) {
  std::mt19937 rng(7);
  std::normal_distribution<float> dist;
  std::vector<float> x(256), y(256);
  for (auto& v : x) v = dist(rng);
  for (DType t : {DType::kQ8_0, DType::kQ4_0, DType::kQ4_1}) {
    std::vector<uint8_t> q(DTypeRowBytes(t, 256));
    QuantizeRow(t, x.data(), q.data(), 256);
    DequantizeRow(t, q.data(), y.data(), 256);
    for (int blk = 0; blk < 8; ++blk) {
      float lo = 1e9, hi = -1e9;
      for (int j = 0; j < 32; ++j) {
        lo = std::min(lo, x[blk * 32 + j]);
        hi = std::max(hi, x[blk * 32 + j]);
      }
      const float amax = std::max(std::fabs(lo), std::fabs(hi));
      const float step = t == DType::kQ8_0 ? amax / 127 : t == DType::kQ4_0 ? amax / 8 : (hi - lo) / 15;
      // Q4_0's grid is -8..7 steps with -8 at the extreme, so the opposite extreme clips by one step.
      const float bound = (t == DType::kQ4_0 ? 1.01f : 0.51f) * step + 1e-3f;
      for (int j = 0; j < 32; ++j) {
        EXPECT_LE(std::fabs(x[blk * 32 + j] - y[blk * 32 + j]), bound) << DTypeName(t);
      }
    }
  }
}

}  // namespace
}  // namespace tpserve
