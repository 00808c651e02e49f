#include "kvstore/slot_mapping.h"

#include <gtest/gtest.h>

#include <vector>

namespace tpserve {
namespace {

TEST(SlotMappingTest, MapsPositionsThroughTheBlockTable) {
  const std::vector<int32_t> table = {7, 2, 9};
  std::vector<int32_t> slots(6, -5);
  // Positions 3..8 with block size 4: blocks 0 (pos 3), 1 (4..7), 2 (8).
  ASSERT_TRUE(ComputeSlotMapping(table, 3, 6, 4, slots.data()).ok());
  EXPECT_EQ(slots, (std::vector<int32_t>{31, 8, 9, 10, 11, 36}));
  // A decode at position 10.
  int32_t slot = -1;
  ASSERT_TRUE(ComputeSlotMapping(table, 10, 1, 4, &slot).ok());
  EXPECT_EQ(slot, 9 * 4 + 2);
  // Nothing to do.
  EXPECT_TRUE(ComputeSlotMapping(table, 12, 0, 4, nullptr).ok());
}

TEST(SlotMappingTest, ShortTableIsAPlanErrorAndWritesNothing) {
  const std::vector<int32_t> table = {7, 2};
  std::vector<int32_t> slots(3, -5);
  const Status st = ComputeSlotMapping(table, 6, 3, 4, slots.data());  // needs position 8 → block 2
  EXPECT_EQ(st.code(), StatusCode::kOutOfRange) << st.ToString();
  EXPECT_EQ(slots, (std::vector<int32_t>(3, -5)));
}

TEST(SlotMappingTest, BadBlockIdsAndArgumentsAreErrors) {
  std::vector<int32_t> slots(4);
  EXPECT_EQ(ComputeSlotMapping(std::vector<int32_t>{0, -1}, 0, 8, 4, slots.data()).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(ComputeSlotMapping(std::vector<int32_t>{0, 5}, 0, 8, 4, slots.data(), /*num_pool_blocks=*/5).code(),
            StatusCode::kInvalidArgument);
  EXPECT_TRUE(ComputeSlotMapping(std::vector<int32_t>{0, 4}, 4, 4, 4, slots.data(), 5).ok());
  EXPECT_EQ(ComputeSlotMapping(std::vector<int32_t>{0}, -1, 1, 4, slots.data()).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ComputeSlotMapping(std::vector<int32_t>{0}, 0, 1, 0, slots.data()).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tpserve
