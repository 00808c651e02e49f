#include "client/client.h"

#include <gtest/gtest.h>

#include <zmq.hpp>

#include "comm/zmq_transport.h"

namespace tpserve {
namespace {

TEST(ClientTest, TypedErrorsBecomeStatusCodes) {
  struct Case {
    proto::ErrorKind kind;
    StatusCode code;
  };
  for (Case c : {Case{proto::ErrorKind::kInvalidRequest, StatusCode::kInvalidArgument},
                 Case{proto::ErrorKind::kPromptTooLong, StatusCode::kOutOfRange},
                 Case{proto::ErrorKind::kOverloaded, StatusCode::kResourceExhausted},
                 Case{proto::ErrorKind::kCancelled, StatusCode::kCancelled},
                 Case{proto::ErrorKind::kWorkerLost, StatusCode::kUnavailable},
                 Case{proto::ErrorKind::kUnauthenticated, StatusCode::kUnauthenticated},
                 Case{proto::ErrorKind::kInternal, StatusCode::kInternal}}) {
    Status s = StatusFromError({c.kind, "why"});
    EXPECT_EQ(s.code(), c.code);
    EXPECT_EQ(s.message(), std::string(proto::ErrorKindName(c.kind)) + ": why");
    // And back: the server's mapping of a Status to a kind agrees.
    EXPECT_EQ(proto::ErrorKindFromStatus(s), c.kind);
  }
}

// A server that never answers: the call ends with DEADLINE_EXCEEDED, and meanwhile the client
// sent heartbeats (so a real coordinator would keep its requests alive).
TEST(ClientTest, TimesOutAndSendsHeartbeatsWhileWaiting) {
  zmq::context_t context(1);
  auto router = ZmqSocket::Bind(context, zmq::socket_type::router, "tcp://127.0.0.1:*");
  ASSERT_TRUE(router.ok());
  ClientOptions options;
  options.server = (*router)->endpoint();
  options.timeout = std::chrono::milliseconds(400);
  options.heartbeat_interval = std::chrono::milliseconds(50);
  auto client = Client::Connect(options);
  ASSERT_TRUE(client.ok());
  auto health = (*client)->Health();
  EXPECT_EQ(health.status().code(), StatusCode::kDeadlineExceeded);
  int num_health = 0, num_heartbeats = 0;
  while (true) {
    auto frames = (*router)->Receive(std::chrono::milliseconds(0));
    if (!frames.ok()) break;
    ASSERT_EQ(frames->size(), 2u);
    auto m = proto::DecodeClientMessage((*frames)[1].data(), (*frames)[1].size());
    ASSERT_TRUE(m.ok());
    num_health += m->kind == proto::ClientMessageKind::kHealth;
    num_heartbeats += m->kind == proto::ClientMessageKind::kHeartbeat;
  }
  EXPECT_EQ(num_health, 1);
  EXPECT_GE(num_heartbeats, 3);
}

}  // namespace
}  // namespace tpserve
