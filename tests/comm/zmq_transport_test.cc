#include "comm/zmq_transport.h"

#include <gtest/gtest.h>

namespace tpserve {
namespace {

using std::chrono::milliseconds;

class ZmqTransportTest : public ::testing::Test {
 protected:
  zmq::context_t context_;
};

TEST_F(ZmqTransportTest, DealerRouterRoundTripOverTcpEphemeralPort) {
  auto router = ZmqSocket::Bind(context_, zmq::socket_type::router, "tcp://127.0.0.1:*");
  ASSERT_TRUE(router.ok()) << router.status().ToString();
  const std::string endpoint = (*router)->endpoint();
  ASSERT_NE(endpoint.find("tcp://127.0.0.1:"), std::string::npos) << endpoint;
  ASSERT_EQ(endpoint.find('*'), std::string::npos) << endpoint;

  SocketOptions options;
  options.routing_id = "worker-7";
  auto dealer = ZmqSocket::Connect(context_, zmq::socket_type::dealer, endpoint, options);
  ASSERT_TRUE(dealer.ok()) << dealer.status().ToString();

  std::string binary("\0\1\2payload", 10);
  ASSERT_TRUE((*dealer)->Send({"hello", binary}, milliseconds(2000)).ok());
  StatusOr<Frames> got = (*router)->Receive(milliseconds(5000));
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_EQ(got->size(), 3u);
  EXPECT_EQ((*got)[0], "worker-7");  // the ROUTER sees the peer's routing id first
  EXPECT_EQ((*got)[1], "hello");
  EXPECT_EQ((*got)[2], binary);

  ASSERT_TRUE((*router)->Send({"worker-7", "reply"}, milliseconds(2000)).ok());
  StatusOr<Frames> reply = (*dealer)->Receive(milliseconds(5000));
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  EXPECT_EQ(*reply, Frames({"reply"}));
}

TEST_F(ZmqTransportTest, ReceiveTimesOutWithDeadlineExceeded) {
  auto router = ZmqSocket::Bind(context_, zmq::socket_type::router, "inproc://timeout");
  ASSERT_TRUE(router.ok());
  StatusOr<Frames> got = (*router)->Receive(milliseconds(20));
  EXPECT_EQ(got.status().code(), StatusCode::kDeadlineExceeded);
  StatusOr<bool> readable = (*router)->WaitReadable(milliseconds(0));
  ASSERT_TRUE(readable.ok());
  EXPECT_FALSE(*readable);
}

TEST_F(ZmqTransportTest, RouterSendToUnknownPeerIsUnavailable) {
  auto router = ZmqSocket::Bind(context_, zmq::socket_type::router, "inproc://unknown");
  ASSERT_TRUE(router.ok());
  Status status = (*router)->Send({"nobody", "x"}, milliseconds(50));
  EXPECT_EQ(status.code(), StatusCode::kUnavailable) << status.ToString();
}

TEST_F(ZmqTransportTest, SendBlockedByHighWaterMarkTimesOut) {
  // A DEALER with no connected peer queues nothing: a send finds no room and must give up.
  auto dealer = ZmqSocket::Bind(context_, zmq::socket_type::dealer, "inproc://nopeer");
  ASSERT_TRUE(dealer.ok());
  Status status = (*dealer)->Send({"x"}, milliseconds(30));
  EXPECT_EQ(status.code(), StatusCode::kDeadlineExceeded) << status.ToString();
}

TEST_F(ZmqTransportTest, OversizedMessageIsDroppedNotDelivered) {
  SocketOptions small;
  small.max_message_bytes = 1024;
  auto router = ZmqSocket::Bind(context_, zmq::socket_type::router, "tcp://127.0.0.1:*", small);
  ASSERT_TRUE(router.ok());
  auto dealer = ZmqSocket::Connect(context_, zmq::socket_type::dealer, (*router)->endpoint());
  ASSERT_TRUE(dealer.ok());
  ASSERT_TRUE((*dealer)->Send({std::string(4096, 'x')}, milliseconds(1000)).ok());
  EXPECT_EQ((*router)->Receive(milliseconds(300)).status().code(), StatusCode::kDeadlineExceeded);
}

TEST_F(ZmqTransportTest, BadEndpointIsInvalidArgument) {
  auto bad = ZmqSocket::Bind(context_, zmq::socket_type::router, "nonsense://x");
  EXPECT_FALSE(bad.ok());
  auto bad_connect = ZmqSocket::Connect(context_, zmq::socket_type::dealer, "tcp://");
  EXPECT_FALSE(bad_connect.ok());
}

TEST_F(ZmqTransportTest, PollReadableReportsWhichSocket) {
  auto a = ZmqSocket::Bind(context_, zmq::socket_type::router, "inproc://a");
  auto b = ZmqSocket::Bind(context_, zmq::socket_type::router, "inproc://b");
  ASSERT_TRUE(a.ok() && b.ok());
  auto to_b = ZmqSocket::Connect(context_, zmq::socket_type::dealer, "inproc://b");
  ASSERT_TRUE(to_b.ok());
  StatusOr<std::vector<bool>> none = PollReadable({a->get(), b->get()}, milliseconds(0));
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(*none, std::vector<bool>({false, false}));
  ASSERT_TRUE((*to_b)->Send({"ping"}, milliseconds(1000)).ok());
  StatusOr<std::vector<bool>> ready = PollReadable({a->get(), b->get()}, milliseconds(5000));
  ASSERT_TRUE(ready.ok());
  EXPECT_EQ(*ready, std::vector<bool>({false, true}));
}

}  // namespace
}  // namespace tpserve
