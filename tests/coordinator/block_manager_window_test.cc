// BlockManager with layer groups (common/kv_groups.h): a sliding group's pages are released once the
// window has passed them, full groups keep every block, prefix hits take only the pages the window
// before the first recomputed token needs, and forks share and copy per page.
#include <gtest/gtest.h>

#include <numeric>
#include <set>

#include "coordinator/block_manager.h"

namespace tpserve {
namespace {

constexpr int32_t kBlockSize = 4;

// Group 0 slides through a window of 4 keys, group 1 attends fully.
KvGroups SlidingAndFull() {
  KvGroups groups;
  groups.sliding = {true, false};
  groups.window = 4;
  return groups;
}

Sequence MakeSeq(uint64_t id, int32_t num_tokens, int32_t first_token) {
  Sequence seq;
  seq.seq_id = id;
  seq.prompt_ids.resize(num_tokens);
  std::iota(seq.prompt_ids.begin(), seq.prompt_ids.end(), first_token);
  return seq;
}

void Prefill(BlockManager& bm, Sequence& seq) {
  const int32_t n = seq.num_tokens() - bm.NumCachedPrefixTokens(seq);
  ASSERT_TRUE(bm.CanAllocate(seq, n));
  bm.Allocate(seq, n);
  seq.num_computed = seq.num_tokens();
  bm.MarkComputed(seq);
}

// One decode step: the sampled token appended, computed, marked.
void Decode(BlockManager& bm, Sequence& seq, int32_t token) {
  seq.output_ids.push_back(token);
  ASSERT_TRUE(bm.CanAppend(seq, 1));
  bm.Append(seq, 1);
  seq.num_computed += 1;
  bm.MarkComputed(seq);
}

// The sliding column of seq's table is -1 exactly before the window of its next query.
void ExpectWindowed(const BlockManager& bm, const Sequence& seq) {
  const int32_t first_live = bm.groups().FirstLiveBlock(seq.num_computed, kBlockSize);
  for (int32_t i = 0; i < bm.NumLogicalBlocks(seq); ++i) {
    EXPECT_EQ(seq.block_table[i * 2] < 0, i < first_live) << "block " << i << " at " << seq.num_computed;
    EXPECT_GE(seq.block_table[i * 2 + 1], 0) << "block " << i;
  }
}

TEST(BlockManagerWindowTest, SlidingPagesAreReleasedAsTheWindowPasses) {
  BlockManager bm(64, kBlockSize, /*enable_prefix_caching=*/false, SlidingAndFull());
  Sequence seq = MakeSeq(1, 10, 100);
  Prefill(bm, seq);
  // 3 blocks x 2 groups; the next query (position 10) reads keys 7..10: block 0 of the window group goes.
  EXPECT_EQ(bm.NumLogicalBlocks(seq), 3);
  EXPECT_EQ(seq.block_table[0], -1);
  ExpectWindowed(bm, seq);
  EXPECT_EQ(bm.Stats().num_used, 5);
  for (int32_t step = 0; step < 50; ++step) {
    Decode(bm, seq, step);
    ExpectWindowed(bm, seq);
    const int32_t blocks = bm.NumLogicalBlocks(seq);
    const int32_t live = blocks - bm.groups().FirstLiveBlock(seq.num_computed, kBlockSize);
    EXPECT_LE(live, 2);  // a 4-key window spans at most 2 blocks of 4
    EXPECT_EQ(bm.Stats().num_used, blocks + live);
  }
  EXPECT_EQ(bm.Stats().num_window_releases, bm.groups().FirstLiveBlock(seq.num_computed, kBlockSize));
  bm.Free(seq);
  EXPECT_EQ(bm.Stats().num_used, 0);
  EXPECT_EQ(bm.Stats().num_free, 64);
}

TEST(BlockManagerWindowTest, ReleasedPagesServeOtherSequences) {
  // 12 pages: a 39-token sequence with full attention would need 10 blocks x 2 groups; here its full
  // group takes 10 pages and its sliding group 1 (positions 36..38, the next query's window), so it
  // fits, and a second sequence's first block (2 pages) does not.
  BlockManager bm(12, kBlockSize, false, SlidingAndFull());
  Sequence a = MakeSeq(1, 4, 0);
  Prefill(bm, a);
  for (int32_t step = 0; step < 35; ++step) Decode(bm, a, step);
  EXPECT_EQ(a.num_computed, 39);
  EXPECT_EQ(bm.Stats().num_used, 10 + 1);
  Sequence b = MakeSeq(2, 2, 500);
  EXPECT_FALSE(bm.CanAllocate(b, 2));
  bm.Free(a);
  EXPECT_TRUE(bm.CanAllocate(b, 2));
}

TEST(BlockManagerWindowTest, PrefixHitTakesTheWindowPagesItNeedsAndStopsWhereTheyAreGone) {
  BlockManager bm(11, kBlockSize, /*enable_prefix_caching=*/true, SlidingAndFull());
  Sequence a = MakeSeq(1, 20, 100);
  Prefill(bm, a);  // 5 full blocks; the window releases sliding blocks 0-3 (registered: they stay cached)
  EXPECT_EQ(bm.Stats().num_used, 6);
  EXPECT_EQ(bm.Stats().num_cached, 4);
  bm.Free(a);
  EXPECT_EQ(bm.Stats().num_cached, 10);

  // The same 20 tokens and more: the hit ends at position 20, whose window starts in block 4.
  Sequence b = MakeSeq(2, 25, 100);
  EXPECT_EQ(bm.NumCachedPrefixTokens(b), 20);
  ASSERT_TRUE(bm.CanAllocate(b, 5));
  bm.Allocate(b, 5);
  EXPECT_EQ(b.num_computed, 20);
  EXPECT_EQ(b.block_table[0], -1);
  EXPECT_EQ(b.block_table[6], -1);  // block 3's sliding page: not needed
  EXPECT_GE(b.block_table[8], 0);   // block 4's sliding page: the window of position 20
  ExpectWindowed(bm, b);
  b.num_computed = 25;
  bm.MarkComputed(b);
  ExpectWindowed(bm, b);
  bm.Free(b);

  // b's four fresh pages took the free page and evicted the three least recently released: the
  // sliding pages of blocks 3, 2 and 1, released first (by a's window, nearest block first).
  EXPECT_EQ(bm.Stats().num_evictions, 3);
  // 17 tokens of a's prompt: 4 full blocks walkable; hits of 4, 3 and 2 blocks need sliding pages of
  // blocks 3, 2 and 1, evicted; a hit of 1 block needs block 0's, still cached.
  Sequence c = MakeSeq(4, 17, 100);
  EXPECT_EQ(bm.NumCachedPrefixTokens(c), 4);
  Prefill(bm, c);
  ExpectWindowed(bm, c);
  bm.Free(c);
  EXPECT_EQ(bm.Stats().num_used, 0);
}

TEST(BlockManagerWindowTest, ForkedSamplesShareAndCopyPerPage) {
  BlockManager bm(64, kBlockSize, false, SlidingAndFull());
  Sequence parent = MakeSeq(1, 10, 100);
  Prefill(bm, parent);
  Sequence child = MakeSeq(2, 10, 100);
  bm.Fork(parent, child);
  EXPECT_EQ(child.block_table, parent.block_table);
  // Both write into the shared partial block 2: the first to append copies both of its pages.
  Decode(bm, child, 7);
  EXPECT_EQ(bm.TakeBlockCopies().size(), 2u);
  Decode(bm, parent, 8);
  EXPECT_TRUE(bm.TakeBlockCopies().empty());  // the parent's pages are its own again
  for (int32_t step = 0; step < 20; ++step) {
    Decode(bm, parent, step);
    Decode(bm, child, step + 1);
    ExpectWindowed(bm, parent);
    ExpectWindowed(bm, child);
  }
  std::set<int32_t> held;
  for (const Sequence* s : {&parent, &child}) {
    for (int32_t page : s->block_table) {
      if (page >= 0) held.insert(page);
    }
  }
  EXPECT_EQ(bm.Stats().num_used, static_cast<int32_t>(held.size()));
  bm.Free(parent);
  bm.Free(child);
  EXPECT_EQ(bm.Stats().num_used, 0);
}

}  // namespace
}  // namespace tpserve
