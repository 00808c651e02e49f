#include "coordinator/sequence.h"

#include <gtest/gtest.h>

#include <set>

namespace tpserve {
namespace {

TEST(SequenceTest, TokensAreThePromptThenTheOutput) {
  Sequence seq;
  seq.prompt_ids = {5, 6, 7};
  seq.output_ids = {8, 9};
  EXPECT_EQ(seq.num_tokens(), 5);
  EXPECT_EQ(seq.token_at(0), 5);
  EXPECT_EQ(seq.token_at(2), 7);
  EXPECT_EQ(seq.token_at(3), 8);
  EXPECT_EQ(seq.token_at(4), 9);
  EXPECT_EQ(seq.AllTokens(), (std::vector<int32_t>{5, 6, 7, 8, 9}));
  seq.num_computed = 4;
  EXPECT_EQ(seq.num_uncomputed(), 1);
}

TEST(SequenceTest, TimingIsUnknownUntilTokensExist) {
  Sequence seq;
  seq.arrival_time_s = 10.0;
  EXPECT_EQ(seq.ttft_s(), -1.0);
  EXPECT_EQ(seq.tpot_s(), -1.0);
  seq.output_ids = {1};
  seq.first_token_time_s = seq.last_token_time_s = 10.5;
  EXPECT_DOUBLE_EQ(seq.ttft_s(), 0.5);
  EXPECT_EQ(seq.tpot_s(), -1.0);  // one token: no inter-token time yet
  seq.output_ids = {1, 2, 3};
  seq.last_token_time_s = 11.5;
  EXPECT_DOUBLE_EQ(seq.tpot_s(), 0.5);
}

TEST(SequenceTest, IdsDependOnRequestAndSampleOnly) {
  EXPECT_EQ(SequenceIdOf(0, 0), 0u);
  EXPECT_EQ(SequenceIdOf(3, 1), 3u * kMaxSamplesPerRequest + 1);
  EXPECT_NE(SequenceIdOf(1, 0), SequenceIdOf(0, kMaxSamplesPerRequest - 1));
  EXPECT_STREQ(FinishReasonName(FinishReason::kLength), "length");
  EXPECT_STREQ(FinishReasonName(FinishReason::kCancelled), "cancelled");
  EXPECT_STREQ(SequenceStatusName(SequenceStatus::kRunning), "running");
}

TEST(SequenceTest, DrawnSeedsAreFreshAndUseAllSixtyFourBits) {
  // 16 draws of 64 random bits: a repeat (chance ~2^-57) or an empty high half in every draw
  // (2^-512) means the seed is not drawn afresh from 64 bits.
  std::set<uint64_t> seeds;
  bool has_high_bits = false;
  for (int i = 0; i < 16; ++i) {
    const uint64_t seed = DrawRequestSeed();
    seeds.insert(seed);
    has_high_bits |= (seed >> 32) != 0;
  }
  EXPECT_EQ(seeds.size(), 16u);
  EXPECT_TRUE(has_high_bits);
}

}  // namespace
}  // namespace tpserve
