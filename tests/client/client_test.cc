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

// The coordinator goes away with a request in flight (it died or restarts): the wait ends at once
// with UNAVAILABLE naming the lost connection, not at the 60 s timeout; a later request on the
// same client reaches whoever listens there again.
TEST(ClientTest, ALostConnectionFailsTheRequestsInFlightAtOnce) {
  zmq::context_t context(1);
  auto router = ZmqSocket::Bind(context, zmq::socket_type::router, "tcp://127.0.0.1:*");
  ASSERT_TRUE(router.ok());
  const std::string endpoint = (*router)->endpoint();
  ClientOptions options;
  options.server = endpoint;
  auto client = Client::Connect(options);
  ASSERT_TRUE(client.ok());
  proto::GenerateRequest request;
  request.prompt_kind = proto::PromptKind::kTokenIds;
  request.prompt_ids = {1, 2, 3};
  ASSERT_TRUE((*client)->Start(request).ok());
  ASSERT_TRUE((*router)->Receive(std::chrono::milliseconds(5000)).ok());  // connected, request arrived
  router->reset();  // the coordinator dies
  const auto start = std::chrono::steady_clock::now();
  auto message = (*client)->Receive(std::chrono::milliseconds(60000));
  EXPECT_EQ(message.status().code(), StatusCode::kUnavailable) << message.status().ToString();
  EXPECT_NE(message.status().message().find("lost"), std::string::npos);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));

  auto restarted = ZmqSocket::Bind(context, zmq::socket_type::router, endpoint);
  ASSERT_TRUE(restarted.ok()) << restarted.status().ToString();
  auto id = (*client)->Start(request);
  ASSERT_TRUE(id.ok());
  auto frames = (*restarted)->Receive(std::chrono::milliseconds(10000));
  ASSERT_TRUE(frames.ok()) << frames.status().ToString();
  auto got = proto::DecodeClientMessage(frames->back().data(), frames->back().size());
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->request_id, *id);
}

}  // namespace
}  // namespace tpserve
