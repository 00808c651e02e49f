#include "kvstore/memory_budget.h"

#include <gtest/gtest.h>

namespace tpserve {
namespace {

TEST(MemoryBudgetTest, ParsesMemAvailable) {
  const std::string meminfo =
      "MemTotal:       24576000 kB\nMemFree:         1000000 kB\nMemAvailable:   20000000 kB\nBuffers: 1 kB\n";
  auto bytes = ParseMemAvailable(meminfo);
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  EXPECT_EQ(*bytes, int64_t{20000000} * 1024);
}

TEST(MemoryBudgetTest, MissingOrMalformedFieldIsDataLoss) {
  EXPECT_EQ(ParseMemAvailable("MemTotal: 5 kB\n").status().code(), StatusCode::kDataLoss);
  EXPECT_EQ(ParseMemAvailable("MemAvailable: lots\n").status().code(), StatusCode::kDataLoss);
  EXPECT_EQ(ParseMemAvailable("MemAvailable: 12 MB\n").status().code(), StatusCode::kDataLoss);
}

TEST(MemoryBudgetTest, HostHasSomeMemory) {
  auto bytes = HostAvailableMemoryBytes();
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  EXPECT_GT(*bytes, 0);
}

TEST(MemoryBudgetTest, BudgetSplitsAcrossRanksAndKeepsTheReserve) {
  EXPECT_EQ(KvBudgetBytes(1000, 0.5, 1, 0), 500);
  EXPECT_EQ(KvBudgetBytes(1000, 0.5, 2, 100), 150);
  EXPECT_EQ(KvBudgetBytes(1000, 0.1, 4, 100), 0);
  EXPECT_EQ(KvBudgetBytes(-5, 1.0, 1, 0), 0);
}

}  // namespace
}  // namespace tpserve
