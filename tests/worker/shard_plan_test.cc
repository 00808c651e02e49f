#include "worker/shard_plan.h"

#include <gtest/gtest.h>

#include <set>

namespace tpserve {
namespace {

ModelConfig Config(int heads, int kv_heads, int ffn, int vocab) {
  ModelConfig c;
  c.num_heads = heads;
  c.num_kv_heads = kv_heads;
  c.head_dim = 64;
  c.hidden_size = heads * 64;
  c.ffn_size = ffn;
  c.vocab_size = vocab;
  return c;
}

// Every query head exactly once, counts within one, and each rank's kv heads exactly the ones its
// query heads read.
TEST(ShardPlanTest, HeadsOf9x3AtEveryDegree) {
  const ModelConfig config = Config(9, 3, 1536, 49152);
  for (int tp = 1; tp <= 9; ++tp) {
    int next_head = 0;
    int min_heads = 100, max_heads = 0;
    for (int rank = 0; rank < tp; ++rank) {
      auto plan = ShardPlan::Make(config, rank, tp);
      ASSERT_TRUE(plan.ok()) << plan.status().ToString();
      EXPECT_EQ(plan->head_begin, next_head) << "tp " << tp << " rank " << rank;
      next_head = plan->head_end;
      min_heads = std::min(min_heads, plan->num_heads());
      max_heads = std::max(max_heads, plan->num_heads());
      std::set<int> needed;
      for (int q = plan->head_begin; q < plan->head_end; ++q) needed.insert(q / 3);
      EXPECT_EQ(plan->kv_head_begin, *needed.begin());
      EXPECT_EQ(plan->kv_head_end, *needed.rbegin() + 1);
      EXPECT_EQ(static_cast<int>(needed.size()), plan->num_kv_heads());
      ASSERT_EQ(static_cast<int>(plan->kv_head_of_q.size()), plan->num_heads());
      for (int i = 0; i < plan->num_heads(); ++i) {
        EXPECT_EQ(plan->kv_head_of_q[i] + plan->kv_head_begin, (plan->head_begin + i) / 3);
      }
      EXPECT_EQ(plan->q_row_begin(), plan->head_begin * 64);
      EXPECT_EQ(plan->kv_row_end(), plan->kv_head_end * 64);
    }
    EXPECT_EQ(next_head, 9);
    EXPECT_LE(max_heads - min_heads, 1);
  }
}

TEST(ShardPlanTest, KnownSplits) {
  const ModelConfig config = Config(9, 3, 1536, 49152);
  // TP 2: heads 0-4 | 5-8; kv heads {0,1} | {1,2} (kv head 1 straddles and is replicated).
  auto r0 = ShardPlan::Make(config, 0, 2);
  auto r1 = ShardPlan::Make(config, 1, 2);
  ASSERT_TRUE(r0.ok() && r1.ok());
  EXPECT_EQ(r0->head_end, 5);
  EXPECT_EQ(r0->kv_head_begin, 0);
  EXPECT_EQ(r0->kv_head_end, 2);
  EXPECT_EQ(r1->kv_head_begin, 1);
  EXPECT_EQ(r1->kv_head_end, 3);
  EXPECT_EQ(r1->kv_head_of_q, (std::vector<int32_t>{0, 1, 1, 1}));
  // TP 9: one head each, one kv head each.
  auto r8 = ShardPlan::Make(config, 8, 9);
  ASSERT_TRUE(r8.ok());
  EXPECT_EQ(r8->head_begin, 8);
  EXPECT_EQ(r8->kv_head_begin, 2);
  EXPECT_EQ(r8->num_kv_heads(), 1);
}

TEST(ShardPlanTest, FfnSplitsInWholeBlocks) {
  for (int tp : {3, 4, 5}) {
    const ModelConfig config = Config(9, 3, 1536, 49152);
    int64_t next = 0, min_size = 1 << 30, max_size = 0;
    for (int rank = 0; rank < tp; ++rank) {
      auto plan = ShardPlan::Make(config, rank, tp);
      ASSERT_TRUE(plan.ok());
      EXPECT_EQ(plan->ffn_begin, next);
      EXPECT_EQ(plan->ffn_begin % 32, 0);
      EXPECT_EQ(plan->ffn_end % 32, 0);
      next = plan->ffn_end;
      min_size = std::min(min_size, plan->ffn_shard());
      max_size = std::max(max_size, plan->ffn_shard());
    }
    EXPECT_EQ(next, 1536);
    EXPECT_LE(max_size - min_size, 32) << "tp " << tp;
  }
  // 1536 / 32 = 48 blocks; at TP 5: 10,10,10,9,9 blocks.
  auto last = ShardPlan::Make(Config(9, 3, 1536, 49152), 4, 5);
  ASSERT_TRUE(last.ok());
  EXPECT_EQ(last->ffn_begin, 39 * 32);
  EXPECT_EQ(last->ffn_end, 1536);
  // A size that is not a multiple of 32: the last rank takes the partial block.
  auto partial = ShardPlan::Make(Config(4, 2, 100, 50), 1, 2);
  ASSERT_TRUE(partial.ok());
  EXPECT_EQ(partial->ffn_begin, 64);
  EXPECT_EQ(partial->ffn_end, 100);
}

TEST(ShardPlanTest, VocabWithRemainders) {
  for (int vocab : {49152, 1001}) {
    for (int tp : {2, 3, 4}) {
      const ModelConfig config = Config(9, 3, 1536, vocab);
      int64_t next = 0;
      for (int rank = 0; rank < tp; ++rank) {
        auto plan = ShardPlan::Make(config, rank, tp);
        ASSERT_TRUE(plan.ok());
        EXPECT_EQ(plan->vocab_begin, next);
        EXPECT_GE(plan->vocab_shard(), vocab / tp);
        EXPECT_LE(plan->vocab_shard(), vocab / tp + 1);
        next = plan->vocab_end;
      }
      EXPECT_EQ(next, vocab);
    }
  }
  auto r2 = ShardPlan::Make(Config(9, 3, 1536, 1001), 2, 3);  // 334, 334, 333
  ASSERT_TRUE(r2.ok());
  EXPECT_EQ(r2->vocab_begin, 668);
  EXPECT_EQ(r2->vocab_end, 1001);
}

// A K-quant ffn_down splits only at its 256-value super-blocks: 1536 = 6 of them, 2,2,1,1 at TP 4.
TEST(ShardPlanTest, KQuantFfnSplitsOnSuperBlocks) {
  RowParallelBlocks blocks;
  blocks.ffn_down = 256;
  blocks.ffn_down_type = "Q6_K";
  const int64_t want[] = {0, 512, 1024, 1280, 1536};
  for (int rank = 0; rank < 4; ++rank) {
    auto plan = ShardPlan::Make(Config(9, 3, 1536, 49152), rank, 4, blocks);
    ASSERT_TRUE(plan.ok()) << plan.status().ToString();
    EXPECT_EQ(plan->ffn_begin, want[rank]);
    EXPECT_EQ(plan->ffn_end, want[rank + 1]);
  }
  // More ranks than super-blocks: the last ranks hold no FFN columns (their partial sums are zero).
  auto empty = ShardPlan::Make(Config(9, 3, 1536, 49152), 8, 9, blocks);
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->ffn_shard(), 0);
}

// A K-quant attn_output with D = 64 splits every 4 heads: 32 heads are 8 groups, so TP 3 gets
// 12, 12, 8 heads and TP 9 is refused with a message naming the type and the block.
TEST(ShardPlanTest, KQuantAttnOutputSplitsInHeadGroups) {
  RowParallelBlocks blocks;
  blocks.attn_output = 256;
  blocks.attn_output_type = "Q4_K";
  const ModelConfig config = Config(32, 8, 4096, 1000);
  const int want[] = {0, 12, 24, 32};
  for (int rank = 0; rank < 3; ++rank) {
    auto plan = ShardPlan::Make(config, rank, 3, blocks);
    ASSERT_TRUE(plan.ok()) << plan.status().ToString();
    EXPECT_EQ(plan->head_begin, want[rank]);
    EXPECT_EQ(plan->head_end, want[rank + 1]);
    EXPECT_EQ(plan->q_row_begin() % 256, 0);
  }
  auto refused = ShardPlan::Make(config, 0, 9, blocks);
  ASSERT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  const std::string message = refused.status().message();
  for (const char* part : {"Q4_K", "256-value blocks", "every 4 heads", "at most 8 ranks"}) {
    EXPECT_NE(message.find(part), std::string::npos) << message;
  }
}

TEST(ShardPlanTest, RejectsBadDegrees) {
  const ModelConfig config = Config(9, 3, 1536, 49152);
  EXPECT_EQ(ShardPlan::Make(config, 0, 0).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ShardPlan::Make(config, 0, 10).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ShardPlan::Make(config, 2, 2).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ShardPlan::Make(Config(9, 4, 1536, 100), 0, 1).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tpserve
