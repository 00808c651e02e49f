// CurveZMQ: key directories, and a ROUTER that admits only listed keys (ZapAuthenticator), over
// real TCP sockets on 127.0.0.1.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include <zmq.hpp>

#include "comm/curve_keys.h"
#include "comm/zap_authenticator.h"
#include "comm/zmq_transport.h"

namespace tpserve {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

class KeyDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (fs::temp_directory_path() / ("tpserve_keys_" + std::to_string(::getpid()))).string();
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string dir_;
};

TEST_F(KeyDirTest, InitWritesPairsWithPrivateSecretsAndNeverOverwrites) {
  auto written = InitKeyDirectory(dir_);
  ASSERT_TRUE(written.ok()) << written.status().ToString();
  EXPECT_EQ(written->size(), 6u);
  for (const char* secret : {"/coordinator.key", "/clients/default.key", "/workers/default.key"}) {
    struct stat st {};
    ASSERT_EQ(::stat((dir_ + secret).c_str(), &st), 0) << secret;
    EXPECT_EQ(st.st_mode & 0777, 0600u) << secret;
  }
  EXPECT_EQ(InitKeyDirectory(dir_).status().code(), StatusCode::kFailedPrecondition);
  ASSERT_TRUE(AddKeyPair(dir_, "clients", "alice").ok());
  EXPECT_EQ(AddKeyPair(dir_, "clients", "alice").status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(AddKeyPair(dir_, "clients", "../x").status().code(), StatusCode::kInvalidArgument);

  auto server = LoadCurveServerKeys(dir_);
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  EXPECT_EQ(server->client_public_keys.size(), 2u);
  EXPECT_EQ(server->worker_public_keys.size(), 1u);
  EXPECT_EQ(server->server.secret_key.size(), 40u);
  // Two client pairs: the default one is chosen unless a name is given.
  auto client = LoadCurveClientKeys(dir_, "clients");
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  EXPECT_EQ(client->server_public_key, server->server.public_key);
  auto alice = LoadCurveClientKeys(dir_, "clients", "alice");
  ASSERT_TRUE(alice.ok());
  EXPECT_NE(alice->own.public_key, client->own.public_key);
}

TEST_F(KeyDirTest, MalformedKeyFilesAreDataLoss) {
  fs::create_directories(dir_);
  std::ofstream(dir_ + "/bad.pub") << "public-key = tooshort\n";
  EXPECT_EQ(ReadCurveKeyFile(dir_ + "/bad.pub").status().code(), StatusCode::kDataLoss);
  std::ofstream(dir_ + "/empty.pub") << "\n";
  EXPECT_EQ(ReadCurveKeyFile(dir_ + "/empty.pub").status().code(), StatusCode::kDataLoss);
  EXPECT_EQ(ReadCurveKeyFile(dir_ + "/absent.pub").status().code(), StatusCode::kNotFound);
}

TEST(LoopbackTest, OnlyLoopbackTcpIpcAndInprocAreLocal) {
  for (const char* local : {"tcp://127.0.0.1:5555", "tcp://127.1.2.3:1", "tcp://localhost:5555", "tcp://[::1]:5555",
                            "ipc:///tmp/x", "inproc://x"}) {
    EXPECT_TRUE(IsLoopbackEndpoint(local)) << local;
  }
  for (const char* remote : {"tcp://*:5555", "tcp://0.0.0.0:5555", "tcp://10.0.0.1:5555", "tcp://[::]:5555",
                             "tcp://eth0:5555"}) {
    EXPECT_FALSE(IsLoopbackEndpoint(remote)) << remote;
  }
}

// A CURVE ROUTER on 127.0.0.1 admitting one client key (domain "clients") and one worker key
// (domain "workers", unused by this socket).
class CurveSocketTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = *GenerateCurveKeyPair();
    client_ = *GenerateCurveKeyPair();
    worker_ = *GenerateCurveKeyPair();
    auto auth = ZapAuthenticator::Start(context_, {{"clients", {client_.public_key}}, {"workers", {worker_.public_key}}});
    ASSERT_TRUE(auth.ok()) << auth.status().ToString();
    auth_ = std::move(*auth);
    SocketOptions options;
    options.curve_server = true;
    options.curve_secret_key = server_.secret_key;
    options.zap_domain = "clients";
    auto router = ZmqSocket::Bind(context_, zmq::socket_type::router, "tcp://127.0.0.1:*", options);
    ASSERT_TRUE(router.ok()) << router.status().ToString();
    router_ = std::move(*router);
  }

  std::unique_ptr<ZmqSocket> Dealer(const CurveKeyPair* own) {
    SocketOptions options;
    if (own != nullptr) {
      options.curve_server_key = server_.public_key;
      options.curve_public_key = own->public_key;
      options.curve_secret_key = own->secret_key;
    }
    auto dealer = ZmqSocket::Connect(context_, zmq::socket_type::dealer, router_->endpoint(), options);
    EXPECT_TRUE(dealer.ok()) << dealer.status().ToString();
    return std::move(*dealer);
  }

  // Sends "hello" from `dealer`; true when the router received it and the answer came back.
  bool RoundTrip(ZmqSocket& dealer, std::chrono::milliseconds wait) {
    if (!dealer.Send({"hello"}, 1000ms).ok()) return false;
    auto got = router_->Receive(wait);
    if (!got.ok()) return false;
    EXPECT_EQ(got->back(), "hello");
    EXPECT_TRUE(router_->Send({got->front(), "hi"}, 1000ms).ok());
    auto reply = dealer.Receive(5000ms);
    return reply.ok() && reply->back() == "hi";
  }

  zmq::context_t context_{1};
  CurveKeyPair server_, client_, worker_;
  std::unique_ptr<ZapAuthenticator> auth_;
  std::unique_ptr<ZmqSocket> router_;
};

TEST_F(CurveSocketTest, ListedClientKeyIsServed) {
  auto dealer = Dealer(&client_);
  EXPECT_TRUE(RoundTrip(*dealer, 5000ms));
  EXPECT_GE(auth_->num_admitted(), 1u);
}

TEST_F(CurveSocketTest, UnlistedKeyAndPlainPeerGetNothingAndTheServerServesOn) {
  CurveKeyPair stranger = *GenerateCurveKeyPair();
  auto unlisted = Dealer(&stranger);
  auto plain = Dealer(nullptr);
  auto wrong_domain = Dealer(&worker_);  // a worker group's key is not a client's
  for (ZmqSocket* s : {unlisted.get(), plain.get(), wrong_domain.get()}) ASSERT_TRUE(s->Send({"hello"}, 1000ms).ok());
  // The two CURVE strangers are asked about and refused (a bounded wait on the counter).
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (auth_->num_refused() < 2 && std::chrono::steady_clock::now() < deadline) {
    (void)router_->WaitReadable(10ms);
  }
  EXPECT_EQ(auth_->num_refused(), 2u);
  EXPECT_EQ(auth_->num_admitted(), 0u);
  // Nothing they sent reached the application; a listed client is served as before.
  auto got = router_->Receive(300ms);
  EXPECT_EQ(got.status().code(), StatusCode::kDeadlineExceeded);
  auto dealer = Dealer(&client_);
  EXPECT_TRUE(RoundTrip(*dealer, 5000ms));
}

}  // namespace
}  // namespace tpserve
