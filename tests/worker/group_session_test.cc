// ServeCoordinator against a scripted coordinator (a ROUTER in the test): handshake, steps,
// heartbeats, plan errors, shutdown, refusal and a silent coordinator.
#include "worker/group_session.h"

#include <atomic>
#include <future>

#include <gtest/gtest.h>

#include "comm/zmq_transport.h"

namespace tpserve {
namespace {

using std::chrono::milliseconds;

// Answers each plan with token = sum of its first sequence's tokens; token ids >= 1000 are a plan
// error, token id 999 an internal (fatal) error.
class FakeGroup : public StepExecutor {
 public:
  StatusOr<StepResult> Execute(const StepPlan& plan) override {
    StepResult result;
    result.step_id = plan.step_id;
    for (const SequencePlan& seq : plan.sequences) {
      int32_t sum = 0;
      for (int32_t id : seq.token_ids) {
        if (id >= 1000) return InvalidArgument("token id out of range");
        if (id == 999) return Internal("the group fell apart");
        sum += id;
      }
      SequenceResult out;
      out.seq_id = seq.seq_id;
      out.token_id = sum;
      result.sequences.push_back(out);
    }
    return result;
  }
};

StepPlan Plan(uint64_t step_id, std::vector<int32_t> tokens) {
  StepPlan plan;
  plan.step_id = step_id;
  SequencePlan seq;
  seq.seq_id = 7;
  seq.token_ids = std::move(tokens);
  seq.block_table = {0};
  seq.needs_token = true;
  plan.sequences.push_back(seq);
  return plan;
}

class GroupSessionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SocketOptions router_options;
    router_options.router_handover = true;  // as the coordinator's worker endpoint
    auto router = ZmqSocket::Bind(context_, zmq::socket_type::router, "tcp://127.0.0.1:*", router_options);
    ASSERT_TRUE(router.ok()) << router.status().ToString();
    router_ = std::move(router).value();
    options_.coordinator_endpoint = router_->endpoint();
    options_.hello.tp_size = 3;
    options_.hello.num_blocks = 128;
    options_.hello.block_size = 16;
    options_.hello.max_model_len = 2048;
    options_.hello.vocab_size = 1001;
    options_.routing_id = "group-a";
    options_.connect_timeout = milliseconds(5000);
  }

  std::future<Status> Start() {
    return std::async(std::launch::async, [this] { return ServeCoordinator(context_, group_, options_); });
  }

  // Receives the next message from connection `from` of the worker, skipping the other's (the
  // session's own, "group-a", or the leader's beats, "group-a/beat"); fails the test on timeout.
  WorkerMessage Next(const std::string& from = "group-a") {
    Frames frames;
    do {
      StatusOr<Frames> received = router_->Receive(milliseconds(5000));
      EXPECT_TRUE(received.ok()) << received.status().ToString();
      if (!received.ok()) return ShutdownMessage{"timeout"};
      frames = std::move(*received);
      EXPECT_EQ(frames.size(), 2u);
    } while (frames.front() != from);
    StatusOr<WorkerMessage> message = DecodeWorkerMessage(frames.back());
    EXPECT_TRUE(message.ok()) << message.status().ToString();
    return message.ok() ? *message : WorkerMessage(ShutdownMessage{"undecodable"});
  }

  void Send(const WorkerMessage& message) {
    ASSERT_TRUE(router_->Send({"group-a", EncodeWorkerMessage(message)}, milliseconds(2000)).ok());
  }

  zmq::context_t context_;
  std::unique_ptr<ZmqSocket> router_;
  GroupSessionOptions options_;
  FakeGroup group_;
};

TEST_F(GroupSessionTest, HandshakeStepsHeartbeatsPlanErrorsAndShutdown) {
  std::future<Status> served = Start();
  WorkerMessage hello = Next();
  ASSERT_TRUE(std::holds_alternative<HelloMessage>(hello));
  EXPECT_EQ(std::get<HelloMessage>(hello).num_blocks, 128);
  EXPECT_EQ(std::get<HelloMessage>(hello).protocol_version, kWorkerProtocolVersion);
  Send(WelcomeMessage{4, 100});

  Send(Plan(1, {1, 2, 3}));
  WorkerMessage result = Next();
  ASSERT_TRUE(std::holds_alternative<StepResult>(result));
  EXPECT_EQ(std::get<StepResult>(result).step_id, 1u);
  EXPECT_EQ(std::get<StepResult>(result).sequences.at(0).token_id, 6);

  Send(HeartbeatMessage{5, 123, false});
  WorkerMessage echo = Next();
  ASSERT_TRUE(std::holds_alternative<HeartbeatMessage>(echo));
  EXPECT_EQ(std::get<HeartbeatMessage>(echo).sequence, 5u);
  EXPECT_TRUE(std::get<HeartbeatMessage>(echo).is_echo);

  Send(Plan(2, {5, 1000}));
  WorkerMessage error = Next();
  ASSERT_TRUE(std::holds_alternative<ErrorMessage>(error));
  EXPECT_EQ(std::get<ErrorMessage>(error).step_id, 2u);
  EXPECT_EQ(std::get<ErrorMessage>(error).code, StatusCode::kInvalidArgument);
  EXPECT_FALSE(std::get<ErrorMessage>(error).is_fatal);

  Send(Plan(3, {10, 20}));  // still serving after a plan error
  WorkerMessage again = Next();
  ASSERT_TRUE(std::holds_alternative<StepResult>(again));
  EXPECT_EQ(std::get<StepResult>(again).sequences.at(0).token_id, 30);

  // The leader also beats from a connection of its own, naming the group it was welcomed as.
  WorkerMessage beat = Next("group-a/beat");
  ASSERT_TRUE(std::holds_alternative<HeartbeatMessage>(beat));
  EXPECT_EQ(std::get<HeartbeatMessage>(beat).group_id, 4u);
  EXPECT_FALSE(std::get<HeartbeatMessage>(beat).is_echo);

  Send(ShutdownMessage{"done"});
  ASSERT_EQ(served.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  Status status = served.get();
  EXPECT_TRUE(status.ok()) << status.ToString();
}

TEST_F(GroupSessionTest, FatalStepErrorIsReportedAndEndsTheSession) {
  std::future<Status> served = Start();
  ASSERT_TRUE(std::holds_alternative<HelloMessage>(Next()));
  Send(WelcomeMessage{1, 0});
  Send(Plan(9, {999}));
  WorkerMessage error = Next();
  ASSERT_TRUE(std::holds_alternative<ErrorMessage>(error));
  EXPECT_TRUE(std::get<ErrorMessage>(error).is_fatal);
  EXPECT_EQ(std::get<ErrorMessage>(error).step_id, 9u);
  ASSERT_EQ(served.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  EXPECT_EQ(served.get().code(), StatusCode::kInternal);
}

// A rank of the group lost while the leader idles: the coordinator hears it at once (a fatal
// Error) and the session ends with the heartbeat's error.
TEST_F(GroupSessionTest, LostRankWhileIdleIsReportedAndEndsTheSession) {
  std::atomic<bool> is_rank_lost{false};
  options_.poll_interval = milliseconds(20);
  options_.check_ranks = [&is_rank_lost] {
    return is_rank_lost.load() ? Unavailable("rank 1 silent for 2000 ms") : OkStatus();
  };
  std::future<Status> served = Start();
  ASSERT_TRUE(std::holds_alternative<HelloMessage>(Next()));
  Send(WelcomeMessage{1, 0});
  Send(Plan(1, {1, 2, 3}));
  ASSERT_TRUE(std::holds_alternative<StepResult>(Next()));
  is_rank_lost.store(true);
  WorkerMessage error = Next();
  ASSERT_TRUE(std::holds_alternative<ErrorMessage>(error));
  EXPECT_TRUE(std::get<ErrorMessage>(error).is_fatal);
  EXPECT_NE(std::get<ErrorMessage>(error).message.find("rank 1"), std::string::npos);
  ASSERT_EQ(served.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  EXPECT_EQ(served.get().code(), StatusCode::kUnavailable);
}

TEST_F(GroupSessionTest, RefusedHelloIsUnavailable) {
  std::future<Status> served = Start();
  ASSERT_TRUE(std::holds_alternative<HelloMessage>(Next()));
  Send(ErrorMessage{StatusCode::kFailedPrecondition, "wrong model", 0, true});
  ASSERT_EQ(served.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  Status status = served.get();
  EXPECT_EQ(status.code(), StatusCode::kUnavailable);
  EXPECT_NE(status.message().find("wrong model"), std::string::npos) << status.ToString();
}

// A coordinator that goes silent (it died): the group notices within the silence bound, keeps its
// weights and registers again (a new Hello) with whoever answers on the endpoint (the restarted
// coordinator), then serves its steps.
TEST_F(GroupSessionTest, SilentCoordinatorIsLeftAndTheGroupRegistersAgain) {
  options_.min_silence = milliseconds(300);
  options_.lost_after_intervals = 2;
  options_.poll_interval = milliseconds(20);
  std::future<Status> served = Start();
  ASSERT_TRUE(std::holds_alternative<HelloMessage>(Next()));
  const auto start = std::chrono::steady_clock::now();
  Send(WelcomeMessage{1, 50});  // heartbeats every 50 ms promised, none sent
  ASSERT_TRUE(std::holds_alternative<HelloMessage>(Next()));
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_GE(waited, 0.29);
  EXPECT_LT(waited, 3.0);
  Send(WelcomeMessage{2, 0});
  Send(Plan(1, {1, 2, 3}));
  WorkerMessage result = Next();
  ASSERT_TRUE(std::holds_alternative<StepResult>(result));
  EXPECT_EQ(std::get<StepResult>(result).sequences.at(0).token_id, 6);
  Send(ShutdownMessage{"done"});
  ASSERT_EQ(served.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  EXPECT_TRUE(served.get().ok());
}

TEST_F(GroupSessionTest, NoCoordinatorIsUnavailableAfterTheConnectTimeout) {
  options_.coordinator_endpoint = "tcp://127.0.0.1:1";  // nothing listens there
  options_.connect_timeout = milliseconds(200);
  Status status = ServeCoordinator(context_, group_, options_);
  EXPECT_EQ(status.code(), StatusCode::kUnavailable) << status.ToString();
}

}  // namespace
}  // namespace tpserve
