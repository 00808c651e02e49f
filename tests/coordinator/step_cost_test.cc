// StepCost: the fit of a + b·n recovers a and b from steps of varied size, one line per batch class,
// follows a change of cost, stays undetermined without spread or with a non-positive slope, and gives
// b / (a / B + b).
#include "coordinator/step_cost.h"

#include <gtest/gtest.h>

namespace tpserve {
namespace {

TEST(StepCostTest, RecoversTheFixedAndPerTokenCosts) {
  StepCost cost;
  // One sequence with 0-6 proposals: 1-7 positions.
  for (int step = 0; step < 40; ++step) cost.Observe(1, 1 + step % 7, 11.0 + 16.0 * (1 + step % 7));
  ASSERT_TRUE(cost.Fit(1).has_value());
  EXPECT_NEAR(cost.Fit(1)->fixed_ms, 11.0, 1e-6);
  EXPECT_NEAR(cost.Fit(1)->per_token_ms, 16.0, 1e-6);
  EXPECT_NEAR(cost.BreakEvenAcceptance(1, 0.6), 16.0 / 27.0, 1e-6);
  EXPECT_NEAR(cost.BreakEvenAcceptance(0, 0.6), 16.0 / 27.0, 1e-6);  // at least one decode
  EXPECT_EQ(cost.BreakEvenAcceptance(16, 0.6), 0.6) << "no step of 16 sequences seen";
}

TEST(StepCostTest, EachBatchClassHasItsOwnLine) {
  StepCost cost;
  for (int step = 0; step < 40; ++step) {
    cost.Observe(1, 1 + step % 5, 25.0 + 2.0 * (1 + step % 5));      // one sequence: reading the weights
    cost.Observe(16, 16 + step % 9, 4.0 + 6.0 * (16 + step % 9));   // sixteen: compute-bound
    cost.Observe(19, 19 + step % 9, 4.0 + 6.0 * (19 + step % 9));   // the same class (16-31)
  }
  ASSERT_TRUE(cost.Fit(1) && cost.Fit(16) && cost.Fit(31));
  EXPECT_NEAR(cost.Fit(1)->per_token_ms, 2.0, 1e-6);
  EXPECT_NEAR(cost.Fit(16)->fixed_ms, 4.0, 1e-6);
  EXPECT_NEAR(cost.Fit(31)->per_token_ms, 6.0, 1e-6);
  EXPECT_FALSE(cost.Fit(8).has_value());
  EXPECT_FALSE(cost.Fit(32).has_value());
  EXPECT_NEAR(cost.BreakEvenAcceptance(1, 0.6), 2.0 / 27.0, 1e-6);
  EXPECT_NEAR(cost.BreakEvenAcceptance(16, 0.6), 6.0 / (4.0 / 16 + 6.0), 1e-6);
}

TEST(StepCostTest, FollowsAChangeOfCost) {
  StepCost cost;
  for (int step = 0; step < 100; ++step) cost.Observe(4, 4 + step % 5, 2.0 + 1.0 * (4 + step % 5));
  for (int step = 0; step < 200; ++step) cost.Observe(4, 4 + step % 5, 40.0 + 0.5 * (4 + step % 5));
  ASSERT_TRUE(cost.Fit(4).has_value());
  EXPECT_NEAR(cost.Fit(4)->fixed_ms, 40.0, 0.1);
  EXPECT_NEAR(cost.Fit(4)->per_token_ms, 0.5, 0.01);
}

TEST(StepCostTest, UndeterminedFallsBack) {
  StepCost cost;
  EXPECT_FALSE(cost.Fit(1).has_value());
  EXPECT_EQ(cost.BreakEvenAcceptance(4, 0.6), 0.6);
  cost.Observe(4, 6, 10);
  cost.Observe(4, 8, 12);
  EXPECT_FALSE(cost.Fit(4).has_value()) << "two steps";
  StepCost constant;
  for (int step = 0; step < 50; ++step) constant.Observe(8, 8, 20.0 + step % 3);
  EXPECT_FALSE(constant.Fit(8).has_value()) << "no spread in the token counts";
  StepCost falling;
  for (int step = 0; step < 50; ++step) falling.Observe(1, 1 + step % 4, 30.0 - (1 + step % 4));
  EXPECT_FALSE(falling.Fit(1).has_value()) << "more tokens, less time";
  EXPECT_EQ(falling.BreakEvenAcceptance(1, 0.7), 0.7);
}

TEST(StepCostTest, ANegativeFixedCostIsZeroAndNothingPays) {
  StepCost cost;
  for (int step = 0; step < 40; ++step) cost.Observe(2, 2 + step % 3, -1.0 + 3.0 * (2 + step % 3));
  ASSERT_TRUE(cost.Fit(2).has_value());
  EXPECT_EQ(cost.Fit(2)->fixed_ms, 0.0);
  EXPECT_EQ(cost.BreakEvenAcceptance(2, 0.6), 1.0);
}

}  // namespace
}  // namespace tpserve
