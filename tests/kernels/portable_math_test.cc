// PortableExp / PortableLog / PortableSinCos against libm: within an ulp or two (libm itself is
// not correctly rounded), exact where the answer is exact, and the edge cases.
#include "kernels/cpu/portable_math.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>

namespace tpserve {
namespace {

// Distance in units in the last place between two finite doubles of the same sign.
int64_t UlpDistance(double a, double b) {
  int64_t ia, ib;
  std::memcpy(&ia, &a, 8);
  std::memcpy(&ib, &b, 8);
  return ia > ib ? ia - ib : ib - ia;
}

TEST(PortableMathTest, ExpWithinTwoUlpsOfLibm) {
  std::mt19937_64 rng(1);
  std::uniform_real_distribution<double> wide(-745.0, 709.7), narrow(-46.0, 0.0);
  int64_t worst = 0;
  for (int i = 0; i < 1000000; ++i) {
    const double x = i % 2 ? wide(rng) : narrow(rng);  // narrow: the sampler's range
    const double want = std::exp(x);
    if (want < 0x1p-1022) continue;  // subnormal results: checked below with an absolute bound
    worst = std::max(worst, UlpDistance(PortableExp(x), want));
  }
  EXPECT_LE(worst, 2);
  EXPECT_EQ(PortableExp(0.0), 1.0);
  EXPECT_EQ(PortableExp(-INFINITY), 0.0);
  EXPECT_EQ(PortableExp(INFINITY), INFINITY);
  EXPECT_EQ(PortableExp(710.0), INFINITY);
  EXPECT_TRUE(std::isnan(PortableExp(NAN)));
  EXPECT_NEAR(PortableExp(-740.0), std::exp(-740.0), 0x1p-1074 * 2);
  EXPECT_GT(PortableExp(709.7), 1e308);
}

TEST(PortableMathTest, LogWithinTwoUlpsOfLibm) {
  std::mt19937_64 rng(2);
  std::uniform_real_distribution<double> unit(0.0, 1.0), exponent(-1070.0, 1020.0);
  int64_t worst = 0;
  for (int i = 0; i < 1000000; ++i) {
    const double x = i % 2 ? unit(rng) : std::exp2(exponent(rng));
    if (x == 0.0 || std::fabs(x - 1.0) < 1e-3) continue;  // near 1: relative ulps of a tiny result, checked below
    worst = std::max(worst, UlpDistance(PortableLog(x), std::log(x)));
  }
  EXPECT_LE(worst, 2);
  for (double x : {1.0 + 1e-9, 1.0 - 1e-9, 1.0005, 0.9995}) EXPECT_NEAR(PortableLog(x), std::log(x), 1e-24) << x;
  EXPECT_EQ(PortableLog(1.0), 0.0);
  EXPECT_EQ(PortableLog(0.0), -INFINITY);
  EXPECT_EQ(PortableLog(INFINITY), INFINITY);
  EXPECT_TRUE(std::isnan(PortableLog(-1.0)));
  EXPECT_NEAR(PortableLog(0x1p-1074), std::log(0x1p-1074), 1e-12);
}

TEST(PortableMathTest, ExpFWithinOneFloatUlp) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> dist(-103.0f, 88.0f);
  for (int i = 0; i < 1000000; ++i) {
    const float x = dist(rng);
    const float want = std::exp(x), got = PortableExpF(x);
    EXPECT_LE(std::fabs(got - want), std::nextafter(want, INFINITY) - want) << x;
  }
  EXPECT_EQ(PortableExpF(89.0f), INFINITY);
  EXPECT_EQ(PortableExpF(-INFINITY), 0.0f);
}

TEST(PortableMathTest, SinCosMatchLibmForRopeAngles) {
  std::mt19937_64 rng(4);
  std::uniform_real_distribution<double> dist(-200000.0, 200000.0);
  for (int i = 0; i < 1000000; ++i) {
    const double x = i % 4 == 0 ? dist(rng) * 1e-5 : dist(rng);
    double s = 0.0, c = 0.0;
    PortableSinCos(x, &s, &c);
    ASSERT_NEAR(s, std::sin(x), 4e-16) << x;
    ASSERT_NEAR(c, std::cos(x), 4e-16) << x;
  }
  double s = 1.0, c = 0.0;
  PortableSinCos(0.0, &s, &c);
  EXPECT_EQ(s, 0.0);
  EXPECT_EQ(c, 1.0);
}

}  // namespace
}  // namespace tpserve
