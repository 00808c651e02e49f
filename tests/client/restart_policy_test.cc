// RestartPolicy: the relaunch schedule of `tpserve serve`, as a table of exits and what follows each.
#include "client/restart_policy.h"

#include <gtest/gtest.h>

#include <vector>

namespace tpserve {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using Clock = RestartPolicy::Clock;

struct Exit {
  milliseconds ran;      // how long the child ran before this exit
  bool relaunch;         // OnExit's answer
  milliseconds backoff;  // the wait before the relaunch (when relaunched)
};

// Runs the exits in order (each relaunch starts once its backoff has passed) and checks each answer.
void Check(milliseconds first, int max_in_a_row, const std::vector<Exit>& exits) {
  Clock::time_point now{};
  RestartPolicy policy(first, max_in_a_row, now);
  for (size_t i = 0; i < exits.size(); ++i) {
    now += exits[i].ran;
    ASSERT_EQ(policy.OnExit(now), exits[i].relaunch) << "exit " << i;
    if (!exits[i].relaunch) return;
    EXPECT_EQ(policy.backoff(), exits[i].backoff) << "exit " << i;
    EXPECT_TRUE(policy.is_pending());
    EXPECT_FALSE(policy.IsDue(now + exits[i].backoff - milliseconds(1))) << "exit " << i;
    now += exits[i].backoff;
    EXPECT_TRUE(policy.IsDue(now)) << "exit " << i;
    policy.OnStart(now);
    EXPECT_FALSE(policy.is_pending());
  }
}

TEST(RestartPolicyTest, BackoffDoublesWithEachExitInARow) {
  Check(milliseconds(500), 5,
        {{seconds(1), true, milliseconds(500)}, {seconds(1), true, milliseconds(1000)},
         {seconds(1), true, milliseconds(2000)}, {seconds(1), true, milliseconds(4000)},
         {seconds(1), true, milliseconds(8000)}});
}

TEST(RestartPolicyTest, GivesUpPastMaxInARow) {
  Check(milliseconds(100), 2,
        {{seconds(1), true, milliseconds(100)}, {seconds(1), true, milliseconds(200)}, {seconds(1), false, {}}});
  Check(milliseconds(100), 0, {{seconds(1), false, {}}});
}

TEST(RestartPolicyTest, ARunOfAMinuteStartsTheCountAgain) {
  Check(milliseconds(500), 2,
        {{seconds(1), true, milliseconds(500)}, {seconds(1), true, milliseconds(1000)},
         {seconds(60), true, milliseconds(500)}, {seconds(59), true, milliseconds(1000)}, {seconds(1), false, {}}});
}

TEST(RestartPolicyTest, BackoffStopsAtThirtySeconds) {
  Check(seconds(20), 4,
        {{seconds(1), true, seconds(20)}, {seconds(1), true, seconds(30)}, {seconds(1), true, seconds(30)}});
}

}  // namespace
}  // namespace tpserve
