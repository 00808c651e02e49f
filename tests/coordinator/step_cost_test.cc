// StepCost: the fit of a + b·n recovers a and b from steps of varied size, follows a change of cost,
// stays undetermined without spread or with a non-positive slope, and gives b / (a / B + b).
#include "coordinator/step_cost.h"

#include <gtest/gtest.h>

namespace tpserve {
namespace {

TEST(StepCostTest, RecoversTheFixedAndPerTokenCosts) {
  StepCost cost;
  for (int step = 0; step < 40; ++step) cost.Observe(1 + step % 7, 11.0 + 16.0 * (1 + step % 7));
  ASSERT_TRUE(cost.Fit().has_value());
  EXPECT_NEAR(cost.Fit()->fixed_ms, 11.0, 1e-6);
  EXPECT_NEAR(cost.Fit()->per_token_ms, 16.0, 1e-6);
  EXPECT_NEAR(cost.BreakEvenAcceptance(1, 0.6), 16.0 / 27.0, 1e-6);
  EXPECT_NEAR(cost.BreakEvenAcceptance(16, 0.6), 16.0 / (11.0 / 16 + 16.0), 1e-6);
  EXPECT_NEAR(cost.BreakEvenAcceptance(0, 0.6), 16.0 / 27.0, 1e-6);  // at least one decode
}

TEST(StepCostTest, FollowsAChangeOfCost) {
  StepCost cost;
  for (int step = 0; step < 100; ++step) cost.Observe(1 + step % 5, 2.0 + 1.0 * (1 + step % 5));
  for (int step = 0; step < 400; ++step) cost.Observe(1 + step % 5, 40.0 + 0.5 * (1 + step % 5));
  ASSERT_TRUE(cost.Fit().has_value());
  EXPECT_NEAR(cost.Fit()->fixed_ms, 40.0, 0.1);
  EXPECT_NEAR(cost.Fit()->per_token_ms, 0.5, 0.01);
}

TEST(StepCostTest, UndeterminedFallsBack) {
  StepCost cost;
  EXPECT_FALSE(cost.Fit().has_value());
  EXPECT_EQ(cost.BreakEvenAcceptance(4, 0.6), 0.6);
  cost.Observe(3, 10);
  cost.Observe(5, 12);
  EXPECT_FALSE(cost.Fit().has_value()) << "two steps";
  StepCost constant;
  for (int step = 0; step < 50; ++step) constant.Observe(8, 20.0 + step % 3);
  EXPECT_FALSE(constant.Fit().has_value()) << "no spread in the token counts";
  StepCost falling;
  for (int step = 0; step < 50; ++step) falling.Observe(1 + step % 4, 30.0 - (1 + step % 4));
  EXPECT_FALSE(falling.Fit().has_value()) << "more tokens, less time";
  EXPECT_EQ(falling.BreakEvenAcceptance(1, 0.7), 0.7);
}

TEST(StepCostTest, ClampsANegativeFixedCost) {
  StepCost cost;
  for (int step = 0; step < 40; ++step) cost.Observe(2 + step % 3, -1.0 + 3.0 * (2 + step % 3));
  ASSERT_TRUE(cost.Fit().has_value());
  EXPECT_EQ(cost.Fit()->fixed_ms, 0.0);
  EXPECT_EQ(cost.BreakEvenAcceptance(1, 0.6), 1.0);
}

}  // namespace
}  // namespace tpserve
