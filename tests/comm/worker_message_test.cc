#include "comm/worker_message.h"

#include <cstdio>
#include <fstream>
#include <random>

#include <gtest/gtest.h>

#include "comm/model_fingerprint.h"
#include "comm/sha256.h"

namespace tpserve {
namespace {

WorkerMessage RoundTrip(const WorkerMessage& message) {
  StatusOr<WorkerMessage> decoded = DecodeWorkerMessage(EncodeWorkerMessage(message));
  EXPECT_TRUE(decoded.ok()) << decoded.status().ToString();
  EXPECT_EQ(decoded->index(), message.index());
  return *decoded;
}

TEST(WorkerMessageTest, HelloRoundTrip) {
  HelloMessage hello;
  hello.model.file_size = 123456789;
  hello.model.sha256 = Sha256::Digest("model");
  hello.tp_size = 3;
  hello.num_blocks = 4096;
  hello.block_size = 16;
  hello.max_model_len = 8192;
  hello.vocab_size = 49152;
  hello.hostname = "node-a";
  hello.pid = 4242;
  hello.kv_groups.sliding = {true, false, true, true};
  hello.kv_groups.window = 512;
  hello.kv_dtype = "q8_0";
  EXPECT_FALSE(std::get<HelloMessage>(RoundTrip(hello)).draft_model.has_value());
  hello.draft_model = ModelFingerprint{777, Sha256::Digest("draft")};
  auto got = std::get<HelloMessage>(RoundTrip(hello));
  EXPECT_EQ(got.draft_model, hello.draft_model);
  EXPECT_EQ(got.kv_groups, hello.kv_groups);
  EXPECT_EQ(got.kv_dtype, "q8_0");
  EXPECT_EQ(got.protocol_version, kWorkerProtocolVersion);
  EXPECT_EQ(got.model, hello.model);
  EXPECT_EQ(got.tp_size, 3);
  EXPECT_EQ(got.num_blocks, 4096);
  EXPECT_EQ(got.block_size, 16);
  EXPECT_EQ(got.max_model_len, 8192);
  EXPECT_EQ(got.vocab_size, 49152);
  EXPECT_EQ(got.hostname, "node-a");
  EXPECT_EQ(got.pid, 4242);
  EXPECT_TRUE(CheckProtocolVersion(got).ok());
  got.protocol_version = kWorkerProtocolVersion + 1;
  EXPECT_EQ(CheckProtocolVersion(got).code(), StatusCode::kFailedPrecondition);
}

TEST(WorkerMessageTest, HelloWithoutGroupsIsOneFullGroupAndSlidingNeedsAWindow) {
  HelloMessage hello;
  hello.kv_groups.sliding.clear();  // what a sender that sets no group writes
  auto got = std::get<HelloMessage>(RoundTrip(hello));
  EXPECT_EQ(got.kv_groups, KvGroups{});
  hello.kv_groups.sliding = {true};
  hello.kv_groups.window = 0;
  auto refused = DecodeWorkerMessage(EncodeWorkerMessage(hello));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("window"), std::string::npos) << refused.status().ToString();
}

TEST(WorkerMessageTest, EveryKindRoundTrips) {
  auto welcome = std::get<WelcomeMessage>(RoundTrip(WelcomeMessage{7, 500}));
  EXPECT_EQ(welcome.group_id, 7u);
  EXPECT_EQ(welcome.heartbeat_interval_ms, 500u);

  auto heartbeat = std::get<HeartbeatMessage>(RoundTrip(HeartbeatMessage{9, -5, true, 3}));
  EXPECT_EQ(heartbeat.sequence, 9u);
  EXPECT_EQ(heartbeat.sent_unix_micros, -5);
  EXPECT_TRUE(heartbeat.is_echo);
  EXPECT_EQ(heartbeat.group_id, 3u);

  EXPECT_EQ(std::get<ShutdownMessage>(RoundTrip(ShutdownMessage{"bye"})).reason, "bye");

  auto error = std::get<ErrorMessage>(
      RoundTrip(ErrorMessage{StatusCode::kResourceExhausted, "out of blocks", 77, true}));
  EXPECT_EQ(error.ToStatus().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(error.message, "out of blocks");
  EXPECT_EQ(error.step_id, 77u);
  EXPECT_TRUE(error.is_fatal);

  StepPlan plan;
  plan.step_id = 5;
  plan.sequences.resize(1);
  plan.sequences[0].seq_id = 3;
  plan.sequences[0].token_ids = {1, 2, 3};
  plan.sequences[0].block_table = {0};
  plan.sequences[0].needs_token = true;
  auto got_plan = std::get<StepPlan>(RoundTrip(plan));
  EXPECT_EQ(got_plan.step_id, 5u);
  EXPECT_EQ(got_plan.sequences[0].token_ids, plan.sequences[0].token_ids);

  StepResult result;
  result.step_id = 5;
  result.sequences.push_back({3, 17, -0.25f, {}, {}});
  auto got_result = std::get<StepResult>(RoundTrip(result));
  EXPECT_EQ(got_result.sequences[0].token_id, 17);
  EXPECT_STREQ(WorkerMessageName(got_result), "StepResult");
}

TEST(WorkerMessageTest, InvalidPlanInsideMessageIsRejected) {
  StepPlan plan;
  plan.sequences.resize(1);
  plan.sequences[0].token_ids = {-4};
  EXPECT_EQ(DecodeWorkerMessage(EncodeWorkerMessage(plan)).status().code(), StatusCode::kInvalidArgument);
  HelloMessage hello;
  hello.tp_size = 0;
  EXPECT_EQ(DecodeWorkerMessage(EncodeWorkerMessage(hello)).status().code(), StatusCode::kInvalidArgument);
}

TEST(WorkerMessageTest, GarbageNeverCrashes) {
  std::mt19937 rng(23);
  std::string good = EncodeWorkerMessage(ErrorMessage{StatusCode::kInternal, "x", 1, false});
  for (int trial = 0; trial < 2000; ++trial) {
    std::string bytes = good;
    for (int k = 0; k < 3; ++k) bytes[rng() % bytes.size()] ^= static_cast<char>(1 << (rng() % 8));
    StatusOr<WorkerMessage> decoded = DecodeWorkerMessage(bytes);
    if (!decoded.ok()) {
      EXPECT_TRUE(decoded.status().code() == StatusCode::kDataLoss ||
                  decoded.status().code() == StatusCode::kInvalidArgument);
    }
  }
}

TEST(ModelFingerprintTest, SizeAndPrefixHash) {
  const std::string path = ::testing::TempDir() + "/fingerprint_test.bin";
  {
    std::ofstream out(path, std::ios::binary);
    out << "GGUF-header-and-metadata";
  }
  StatusOr<ModelFingerprint> fp = ComputeModelFingerprint(path);
  ASSERT_TRUE(fp.ok()) << fp.status().ToString();
  EXPECT_EQ(fp->file_size, 24u);
  EXPECT_EQ(fp->sha256, Sha256::Digest("GGUF-header-and-metadata"));
  EXPECT_EQ(fp->ToHex(), "24:" + Sha256::HexDigest("GGUF-header-and-metadata"));
  std::remove(path.c_str());
  EXPECT_EQ(ComputeModelFingerprint(path).status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace tpserve
