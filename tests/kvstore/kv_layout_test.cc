// KvLayout and KvGroups: which layers share a page, where each layer sits in it, and the page
// arithmetic the coordinator's admission check and the capacity report use.
#include "kvstore/kv_layout.h"

#include <gtest/gtest.h>

#include <vector>

namespace tpserve {
namespace {

// Gemma 3's pattern: every 6th layer (5, 11, ...) attends globally, the rest through the window.
std::vector<bool> GemmaPattern(int num_layers) {
  std::vector<bool> sliding(num_layers);
  for (int l = 0; l < num_layers; ++l) sliding[l] = (l + 1) % 6 != 0;
  return sliding;
}

TEST(KvLayoutTest, SharedIsOneGroupOfEveryLayer) {
  const KvLayout layout = KvLayout::Shared(4);
  EXPECT_EQ(layout.layers_per_page, 4);
  EXPECT_EQ(layout.groups, KvGroups{});
  EXPECT_EQ(layout.layer_group, (std::vector<int32_t>{0, 0, 0, 0}));
  EXPECT_EQ(layout.layer_slot, (std::vector<int32_t>{0, 1, 2, 3}));
  EXPECT_EQ(KvLayout::Windowed({false, false, false, false}, 0).layer_slot, layout.layer_slot);
}

TEST(KvLayoutTest, Gemma3PagesHoldTheGcdOfTheKindsLayerCounts) {
  // 270M: 18 layers, 15 sliding and 3 full -> pages of 3 layers, 5 sliding groups and 1 full group.
  const KvLayout layout = KvLayout::Windowed(GemmaPattern(18), 512);
  EXPECT_EQ(layout.layers_per_page, 3);
  EXPECT_EQ(layout.groups.sliding, (std::vector<bool>{true, true, false, true, true, true}));
  EXPECT_EQ(layout.groups.window, 512);
  // Sliding layers 0-4, 6-10, 12-16 fill groups in order; full layers 5, 11, 17 share group 2.
  EXPECT_EQ(layout.layer_group,
            (std::vector<int32_t>{0, 0, 0, 1, 1, 2, 1, 3, 3, 3, 4, 2, 4, 4, 5, 5, 5, 2}));
  EXPECT_EQ(layout.layer_slot, (std::vector<int32_t>{0, 1, 2, 0, 1, 0, 2, 0, 1, 2, 0, 1, 1, 2, 0, 1, 2, 2}));
  // 1B: 26 layers, 22 sliding and 4 full -> pages of 2 layers, 13 groups.
  const KvLayout one_b = KvLayout::Windowed(GemmaPattern(26), 512);
  EXPECT_EQ(one_b.layers_per_page, 2);
  EXPECT_EQ(one_b.num_groups(), 13);
  EXPECT_EQ(one_b.groups.num_sliding(), 11);
}

TEST(KvLayoutTest, EveryLayerSlidingIsOneSlidingGroup) {  // Mistral
  const KvLayout layout = KvLayout::Windowed({true, true, true}, 4096);
  EXPECT_EQ(layout.layers_per_page, 3);
  EXPECT_EQ(layout.groups.sliding, (std::vector<bool>{true}));
  EXPECT_EQ(layout.layer_slot, (std::vector<int32_t>{0, 1, 2}));
}

TEST(KvGroupsTest, FirstLiveBlockIsTheBlockOfTheWindowsFirstKey) {
  KvGroups groups;
  EXPECT_EQ(groups.FirstLiveBlock(1000, 16), 0);  // nothing slides
  groups.sliding = {true, false};
  groups.window = 4;
  // A query at position p reads keys p - 3 .. p.
  EXPECT_EQ(groups.FirstLiveBlock(0, 4), 0);
  EXPECT_EQ(groups.FirstLiveBlock(6, 4), 0);  // keys 3..6
  EXPECT_EQ(groups.FirstLiveBlock(7, 4), 1);  // keys 4..7
  EXPECT_EQ(groups.FirstLiveBlock(11, 4), 2);
}

TEST(KvGroupsTest, MaxPagesHeldCountsTheWindowAndOneStepInASlidingGroup) {
  KvGroups groups;
  groups.sliding = {true, true, false};
  groups.window = 32;
  // 1000 positions in blocks of 16 = 63 blocks. A sliding group holds at most the window's 31 earlier
  // keys, the step's tokens and one block of alignment: ceil((31 + 16) / 16) + 1 = 4 blocks.
  EXPECT_EQ(groups.MaxPagesHeld(1000, 16, 16), 63 + 2 * 4);
  EXPECT_EQ(groups.MaxPagesHeld(1000, 512, 16), 63 + 2 * 35);  // ceil(543 / 16) + 1
  EXPECT_EQ(groups.MaxPagesHeld(20, 512, 16), 3 * 2);  // shorter than the window: every block
  EXPECT_EQ(KvGroups{}.MaxPagesHeld(1000, 512, 16), 63);
}

TEST(KvGroupsTest, ValidateWantsAGroupAndAWindowWhenOneSlides) {
  EXPECT_TRUE(KvGroups{}.Validate().ok());
  KvGroups none;
  none.sliding.clear();
  EXPECT_EQ(none.Validate().code(), StatusCode::kInvalidArgument);
  KvGroups no_window;
  no_window.sliding = {true};
  EXPECT_EQ(no_window.Validate().code(), StatusCode::kInvalidArgument);
}

TEST(KvLayoutTest, CapacityReport) {
  EXPECT_EQ(KvLayout::Shared(2).CapacityReport(100, 16, 500),
            "100 pages of 2 layers x 16 tokens = 1600 tokens; a 500-token sequence takes 32 pages: "
            "3 concurrent sequences");
  // 6 groups of 3 layers; a 4096-token sequence: 256 pages in the full group, 5 x (ceil(527 / 16) + 1 = 34).
  EXPECT_EQ(KvLayout::Windowed(GemmaPattern(18), 512).CapacityReport(6000, 16, 4096),
            "6000 pages of 3 layers x 16 tokens; a 4096-token sequence takes 426 pages (5 of 6 groups slide, "
            "keeping 512 tokens): 14 concurrent sequences");
}

}  // namespace
}  // namespace tpserve
