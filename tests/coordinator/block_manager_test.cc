#include "coordinator/block_manager.h"

#include <gtest/gtest.h>

#include <numeric>
#include <set>

#include "coordinator/prefix_cache.h"

namespace tpserve {
namespace {

constexpr int32_t kBlockSize = 4;

Sequence MakeSeq(uint64_t id, std::vector<int32_t> prompt) {
  Sequence seq;
  seq.seq_id = id;
  seq.prompt_ids = std::move(prompt);
  return seq;
}

std::vector<int32_t> Iota(int32_t n, int32_t start) {
  std::vector<int32_t> v(n);
  std::iota(v.begin(), v.end(), start);
  return v;
}

// Allocates and "computes" the whole of seq's tokens, as a prefill step would.
void Prefill(BlockManager& bm, Sequence& seq) {
  const int32_t n = seq.num_tokens() - bm.NumCachedPrefixTokens(seq);
  ASSERT_TRUE(bm.CanAllocate(seq, n));
  bm.Allocate(seq, n);
  seq.num_computed = seq.num_tokens();
  bm.MarkComputed(seq);
}

void ExpectCounts(const BlockManager& bm, int32_t used, int32_t cached, int32_t free) {
  const BlockStats s = bm.Stats();
  EXPECT_EQ(s.num_used, used);
  EXPECT_EQ(s.num_cached, cached);
  EXPECT_EQ(s.num_free, free);
  EXPECT_EQ(bm.num_available(), cached + free);
}

TEST(BlockManagerTest, AllocateAppendFree) {
  BlockManager bm(8, kBlockSize, /*enable_prefix_caching=*/false);
  Sequence seq = MakeSeq(1, Iota(10, 100));
  ASSERT_TRUE(bm.CanAllocate(seq, 10));
  bm.Allocate(seq, 10);
  EXPECT_EQ(seq.block_table, (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(seq.num_computed, 0);
  ExpectCounts(bm, 3, 0, 5);
  EXPECT_DOUBLE_EQ(bm.Stats().kv_waste, 2.0 / 12.0);
  seq.num_computed = 10;
  bm.MarkComputed(seq);

  // Positions 10 and 11 fit the third block; position 12 needs a fourth.
  seq.output_ids = {1};
  EXPECT_TRUE(bm.CanAppend(seq, 1));
  bm.Append(seq, 1);
  EXPECT_EQ(seq.block_table.size(), 3u);
  seq.num_computed = 11;
  seq.output_ids = {1, 2};
  bm.Append(seq, 1);
  seq.num_computed = 12;
  seq.output_ids = {1, 2, 3};
  bm.Append(seq, 1);
  EXPECT_EQ(seq.block_table, (std::vector<int32_t>{0, 1, 2, 3}));
  ExpectCounts(bm, 4, 0, 4);
  EXPECT_TRUE(bm.TakeBlockCopies().empty());

  bm.Free(seq);
  EXPECT_TRUE(seq.block_table.empty());
  EXPECT_EQ(seq.num_computed, 0);
  ExpectCounts(bm, 0, 0, 8);
}

TEST(BlockManagerTest, CheckFailsWhenBlocksRunOut) {
  BlockManager bm(2, kBlockSize, false);
  Sequence a = MakeSeq(1, Iota(9, 0));
  EXPECT_FALSE(bm.CanAllocate(a, 9));  // 3 blocks
  EXPECT_TRUE(bm.CanAllocate(a, 8));
  EXPECT_EQ(bm.MaxAllocatableTokens(a), 8);
  bm.Allocate(a, 8);
  a.num_computed = 8;
  EXPECT_FALSE(bm.CanAppend(a, 1));
  EXPECT_EQ(bm.MaxAppendableTokens(a), 0);
  EXPECT_TRUE(bm.CanAppend(a, 0));
}

TEST(BlockManagerTest, PrefixHitReusesFullBlocksAndSkipsTheirTokens) {
  BlockManager bm(8, kBlockSize, true);
  Sequence a = MakeSeq(1, Iota(10, 0));  // blocks [0..3] [4..7] [8 9]
  Prefill(bm, a);
  ASSERT_EQ(a.block_table, (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(a.block_hashes.size(), 2u);  // only full blocks are hashed

  // b shares the first 8 tokens, then differs.
  std::vector<int32_t> prompt_b = Iota(8, 0);
  prompt_b.push_back(77);
  prompt_b.push_back(78);
  prompt_b.push_back(79);
  Sequence b = MakeSeq(2, prompt_b);
  EXPECT_EQ(bm.NumCachedPrefixTokens(b), 8);
  ASSERT_TRUE(bm.CanAllocate(b, 3));
  bm.Allocate(b, 3);
  EXPECT_EQ(b.num_computed, 8);
  EXPECT_EQ(b.block_table, (std::vector<int32_t>{0, 1, 3}));
  EXPECT_EQ(bm.ref_count(0), 2);
  EXPECT_EQ(bm.ref_count(1), 2);
  EXPECT_EQ(bm.ref_count(2), 1);
  EXPECT_EQ(bm.ref_count(3), 1);
  ExpectCounts(bm, 4, 0, 4);
  const BlockStats s = bm.Stats();
  EXPECT_EQ(s.prefix_query_tokens, 10 + 11);
  EXPECT_EQ(s.prefix_hit_tokens, 8);
  EXPECT_DOUBLE_EQ(s.prefix_hit_rate(), 8.0 / 21.0);

  // Freed full blocks stay cached; the partial one becomes free.
  bm.Free(a);
  ExpectCounts(bm, 3, 0, 5);  // 0 and 1 still used by b, 3 used by b
  bm.Free(b);
  ExpectCounts(bm, 0, 2, 6);
  EXPECT_EQ(bm.Stats().num_used + bm.Stats().num_cached + bm.Stats().num_free, 8);
}

TEST(BlockManagerTest, UnreferencedCachedBlocksAreHitAgain) {
  BlockManager bm(8, kBlockSize, true);
  Sequence a = MakeSeq(1, Iota(9, 0));
  Prefill(bm, a);
  bm.Free(a);
  ExpectCounts(bm, 0, 2, 6);
  Sequence b = MakeSeq(2, Iota(9, 0));
  EXPECT_EQ(bm.NumCachedPrefixTokens(b), 8);
  // Taking the 2 cached blocks plus 1 fresh consumes 3 of the 8 available.
  bm.Allocate(b, 1);
  EXPECT_EQ(b.num_computed, 8);
  ExpectCounts(bm, 3, 0, 5);
}

TEST(BlockManagerTest, NeverServesTheWholeSequence) {
  BlockManager bm(8, kBlockSize, true);
  Sequence a = MakeSeq(1, Iota(8, 0));
  Prefill(bm, a);
  bm.Free(a);
  // Identical 8-token prompt: both blocks are cached, but the last token must be recomputed, so
  // only the first block is served and the second is recomputed in full.
  Sequence b = MakeSeq(2, Iota(8, 0));
  EXPECT_EQ(bm.NumCachedPrefixTokens(b), 4);
  Sequence c = MakeSeq(3, Iota(9, 0));
  EXPECT_EQ(bm.NumCachedPrefixTokens(c), 8);
}

TEST(BlockManagerTest, HashChainsOnTheParent) {
  BlockManager bm(8, kBlockSize, true);
  Sequence a = MakeSeq(1, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  Prefill(bm, a);
  // Block [5 6 7 8] is cached, but after parent [1 2 3 4]; at the start of a prompt it is a miss.
  Sequence b = MakeSeq(2, {5, 6, 7, 8, 9});
  EXPECT_EQ(bm.NumCachedPrefixTokens(b), 0);
  // And a different first block breaks the chain for the identical second block.
  Sequence c = MakeSeq(3, {0, 2, 3, 4, 5, 6, 7, 8, 9});
  EXPECT_EQ(bm.NumCachedPrefixTokens(c), 0);
}

TEST(BlockManagerTest, DisabledCachingNeverHits) {
  BlockManager bm(8, kBlockSize, false);
  Sequence a = MakeSeq(1, Iota(9, 0));
  Prefill(bm, a);
  bm.Free(a);
  ExpectCounts(bm, 0, 0, 8);
  Sequence b = MakeSeq(2, Iota(9, 0));
  EXPECT_EQ(bm.NumCachedPrefixTokens(b), 0);
}

TEST(BlockManagerTest, EvictsLeastRecentlyReleasedTailFirst) {
  BlockManager bm(4, kBlockSize, true);
  Sequence a = MakeSeq(1, Iota(9, 0));    // full blocks 0, 1 + partial 2
  Prefill(bm, a);
  Sequence b = MakeSeq(2, Iota(5, 100));  // full block 3 (partial block needs a 5th: none left)
  ASSERT_FALSE(bm.CanAllocate(b, 5));
  bm.Free(a);  // releases 2 (free), 1, 0 (cached, in that order)
  ExpectCounts(bm, 0, 2, 2);
  bm.Allocate(b, 5);  // takes free 2 and 3
  b.num_computed = 5;
  bm.MarkComputed(b);
  EXPECT_EQ(b.block_table, (std::vector<int32_t>{2, 3}));
  Sequence c = MakeSeq(3, Iota(2, 500));
  bm.Allocate(c, 2);  // no free block: evicts block 1 (a's tail, released before block 0)
  EXPECT_EQ(c.block_table, (std::vector<int32_t>{1}));
  EXPECT_EQ(bm.Stats().num_evictions, 1);
  // a's first block survives, its second is gone.
  Sequence a2 = MakeSeq(4, Iota(9, 0));
  EXPECT_EQ(bm.NumCachedPrefixTokens(a2), 4);
  bm.Free(b);
  bm.Free(c);
  // b's full block 3 is cached now, after a's block 0: evicted later.
  ExpectCounts(bm, 0, 2, 2);
  Sequence d = MakeSeq(5, Iota(12, 900));  // three fresh blocks: free 1, free 2, then evict 0
  bm.Allocate(d, 12);
  EXPECT_EQ(bm.NumCachedPrefixTokens(a2), 0);
  Sequence b2 = MakeSeq(6, Iota(5, 100));
  EXPECT_EQ(bm.NumCachedPrefixTokens(b2), 4);
}

TEST(BlockManagerTest, ForkSharesAndCopyOnWriteSplitsThePartialBlock) {
  BlockManager bm(8, kBlockSize, true);
  Sequence parent = MakeSeq(1, Iota(7, 0));
  // Prefill up to the fork point (all but the last prompt token): [0..3] [4 5].
  bm.Allocate(parent, 6);
  parent.num_computed = 6;
  bm.MarkComputed(parent);
  Sequence child = MakeSeq(2, Iota(7, 0));
  bm.Fork(parent, child);
  EXPECT_EQ(child.block_table, parent.block_table);
  EXPECT_EQ(child.num_computed, 6);
  EXPECT_EQ(bm.ref_count(0), 2);
  EXPECT_EQ(bm.ref_count(1), 2);
  ExpectCounts(bm, 2, 0, 6);

  // The parent writes position 6 into shared block 1: it gets a copy.
  EXPECT_TRUE(bm.CanAppend(parent, 1));
  bm.Append(parent, 1);
  EXPECT_EQ(parent.block_table, (std::vector<int32_t>{0, 2}));
  EXPECT_EQ(bm.ref_count(1), 1);
  EXPECT_EQ(bm.ref_count(2), 1);
  EXPECT_EQ(bm.TakeBlockCopies(), (std::vector<std::pair<int32_t, int32_t>>{{1, 2}}));
  EXPECT_TRUE(bm.TakeBlockCopies().empty());
  // The child is now the only holder of block 1: it writes in place.
  bm.Append(child, 1);
  EXPECT_EQ(child.block_table, (std::vector<int32_t>{0, 1}));
  EXPECT_TRUE(bm.TakeBlockCopies().empty());
  EXPECT_EQ(bm.Stats().num_copies, 1);
  ExpectCounts(bm, 3, 0, 5);

  bm.Free(parent);
  bm.Free(child);
  EXPECT_EQ(bm.Stats().num_free + bm.Stats().num_cached, 8);
  EXPECT_EQ(bm.Stats().num_cached, 1);  // block 0 (the only full computed block)
}

TEST(BlockManagerTest, CopyOnWriteNeedsABlockToCopyInto) {
  BlockManager bm(2, kBlockSize, false);
  Sequence parent = MakeSeq(1, Iota(3, 0));
  bm.Allocate(parent, 2);
  parent.num_computed = 2;
  Sequence child = MakeSeq(2, Iota(3, 0));
  bm.Fork(parent, child);
  Sequence other = MakeSeq(3, Iota(1, 0));
  bm.Allocate(other, 1);  // the last block
  EXPECT_FALSE(bm.CanAppend(parent, 1));
  EXPECT_EQ(bm.MaxAppendableTokens(parent), 0);
  bm.Free(other);
  EXPECT_TRUE(bm.CanAppend(parent, 1));
}

TEST(BlockManagerTest, ResetForgetsCachedContent) {
  BlockManager bm(4, kBlockSize, true);
  Sequence a = MakeSeq(1, Iota(9, 0));
  Prefill(bm, a);
  bm.Free(a);
  ExpectCounts(bm, 0, 2, 2);
  bm.ResetPrefixCache();
  ExpectCounts(bm, 0, 0, 4);
  Sequence b = MakeSeq(2, Iota(9, 0));
  EXPECT_EQ(bm.NumCachedPrefixTokens(b), 0);
}

TEST(PrefixCacheTest, CollisionsAreCaughtByTheStoredTokens) {
  PrefixCache cache(4, 2);
  const int32_t tokens[2] = {1, 2};
  const int32_t other[2] = {1, 3};
  ASSERT_TRUE(cache.Insert(0, /*hash=*/42, kRootBlockHash, tokens));
  EXPECT_EQ(cache.Lookup(42, kRootBlockHash, tokens), 0);
  EXPECT_EQ(cache.Lookup(42, kRootBlockHash, other), -1);  // same hash, other content
  EXPECT_EQ(cache.Lookup(42, 7, tokens), -1);              // same hash, other parent
  EXPECT_FALSE(cache.Insert(1, 42, kRootBlockHash, other));  // hash taken: not registered
  EXPECT_FALSE(cache.IsRegistered(1));
}

TEST(PrefixCacheTest, HashDependsOnParentOrderAndLength) {
  const int32_t a[3] = {1, 2, 3};
  const int32_t b[3] = {3, 2, 1};
  EXPECT_NE(HashBlockTokens(kRootBlockHash, a, 3), HashBlockTokens(kRootBlockHash, b, 3));
  EXPECT_NE(HashBlockTokens(kRootBlockHash, a, 3), HashBlockTokens(1, a, 3));
  EXPECT_NE(HashBlockTokens(kRootBlockHash, a, 2), HashBlockTokens(kRootBlockHash, a, 3));
  EXPECT_EQ(HashBlockTokens(5, a, 3), HashBlockTokens(5, a, 3));
}

TEST(PrefixCacheTest, LruOrder) {
  PrefixCache cache(4, 1);
  for (int32_t b = 0; b < 4; ++b) {
    const int32_t t = b;
    ASSERT_TRUE(cache.Insert(b, HashBlockTokens(kRootBlockHash, &t, 1), kRootBlockHash, &t));
  }
  cache.PushEvictable(2);
  cache.PushEvictable(0);
  cache.PushEvictable(3);
  cache.RemoveEvictable(0);
  EXPECT_EQ(cache.num_evictable(), 2);
  EXPECT_EQ(cache.EvictOldest(), 2);
  EXPECT_FALSE(cache.IsRegistered(2));
  EXPECT_EQ(cache.EvictOldest(), 3);
  EXPECT_EQ(cache.num_evictable(), 0);
}

// With layer groups (common/kv_groups.h): a sliding group's pages are released once the window has passed
// them, full groups keep every block, prefix hits take only the pages the window before the first
// recomputed token needs, and forks share and copy per page.

// Group 0 slides through a window of 4 keys, group 1 attends fully.
KvGroups SlidingAndFull() {
  KvGroups groups;
  groups.sliding = {true, false};
  groups.window = 4;
  return groups;
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
  Sequence seq = MakeSeq(1, Iota(10, 100));
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
  Sequence a = MakeSeq(1, Iota(4, 0));
  Prefill(bm, a);
  for (int32_t step = 0; step < 35; ++step) Decode(bm, a, step);
  EXPECT_EQ(a.num_computed, 39);
  EXPECT_EQ(bm.Stats().num_used, 10 + 1);
  Sequence b = MakeSeq(2, Iota(2, 500));
  EXPECT_FALSE(bm.CanAllocate(b, 2));
  bm.Free(a);
  EXPECT_TRUE(bm.CanAllocate(b, 2));
}

TEST(BlockManagerWindowTest, PrefixHitTakesTheWindowPagesItNeedsAndStopsWhereTheyAreGone) {
  BlockManager bm(11, kBlockSize, /*enable_prefix_caching=*/true, SlidingAndFull());
  Sequence a = MakeSeq(1, Iota(20, 100));
  Prefill(bm, a);  // 5 full blocks; the window releases sliding blocks 0-3 (registered: they stay cached)
  EXPECT_EQ(bm.Stats().num_used, 6);
  EXPECT_EQ(bm.Stats().num_cached, 4);
  bm.Free(a);
  EXPECT_EQ(bm.Stats().num_cached, 10);

  // The same 20 tokens and more: the hit ends at position 20, whose window starts in block 4.
  Sequence b = MakeSeq(2, Iota(25, 100));
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
  Sequence c = MakeSeq(4, Iota(17, 100));
  EXPECT_EQ(bm.NumCachedPrefixTokens(c), 4);
  Prefill(bm, c);
  ExpectWindowed(bm, c);
  bm.Free(c);
  EXPECT_EQ(bm.Stats().num_used, 0);
}

TEST(BlockManagerWindowTest, ForkedSamplesShareAndCopyPerPage) {
  BlockManager bm(64, kBlockSize, false, SlidingAndFull());
  Sequence parent = MakeSeq(1, Iota(10, 100));
  Prefill(bm, parent);
  Sequence child = MakeSeq(2, Iota(10, 100));
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
