// The coordinator with a CURVE key directory (--keys): over real TCP on 127.0.0.1, a listed client
// and a listed worker group are served; an unlisted client gets no reply, an unlisted worker group
// cannot register; and without keys a non-loopback bind is refused unless insecure.
#include <gtest/gtest.h>

#include <filesystem>
#include <thread>

#include "client/client.h"
#include "comm/curve_keys.h"
#include "coordinator/server.h"
#include "tests/coordinator/fake_worker_group.h"

namespace tpserve {
namespace {

using namespace std::chrono_literals;
using testing::FakeWorkerGroup;
using testing::FakeWorkerGroupOptions;
namespace fs = std::filesystem;

ServerOptions Options(const std::string& keys_dir) {
  ServerOptions options;
  options.client_endpoint = "tcp://127.0.0.1:*";
  options.worker_endpoint = "tcp://127.0.0.1:*";
  options.model_name = "fake";
  options.limits = {64, 1024};
  options.eos_id = 63;
  options.keys_dir = keys_dir;
  return options;
}

class ServerCurveTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (fs::temp_directory_path() / ("tpserve_curve_" + std::to_string(::getpid()))).string();
    fs::remove_all(dir_);
    ASSERT_TRUE(InitKeyDirectory(dir_).ok());
    // Keys made elsewhere and never listed with this coordinator.
    ASSERT_TRUE(InitKeyDirectory(dir_ + "-stranger").ok());
    auto server = Server::Create(Options(dir_), nullptr);
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    server_ = std::move(*server);
    run_ = std::thread([this] { (void)server_->Run(); });
  }
  void TearDown() override {
    groups_.clear();
    if (server_) {
      server_->RequestStop();
      run_.join();
    }
    fs::remove_all(dir_);
    fs::remove_all(dir_ + "-stranger");
  }

  // A client holding DIR/clients/default.key of `dir`, with the coordinator's real public key.
  std::unique_ptr<Client> NewClient(const std::string& own_dir, std::chrono::milliseconds timeout) {
    ClientOptions options;
    options.server = server_->client_endpoint();
    options.timeout = timeout;
    options.keys_dir = dir_;
    if (own_dir != dir_) {  // the right server key, an unlisted own key
      auto own = LoadCurveClientKeys(own_dir, "clients");
      fs::create_directories(dir_ + "-mixed/clients");
      fs::copy_file(dir_ + "/coordinator.pub", dir_ + "-mixed/coordinator.pub", fs::copy_options::overwrite_existing);
      fs::copy_file(own_dir + "/clients/default.key", dir_ + "-mixed/clients/default.key",
                    fs::copy_options::overwrite_existing);
      options.keys_dir = dir_ + "-mixed";
    }
    auto client = Client::Connect(options);
    EXPECT_TRUE(client.ok()) << client.status().ToString();
    return std::move(*client);
  }

  FakeWorkerGroup& AddGroup(const std::string& own_dir) {
    FakeWorkerGroupOptions options;
    auto keys = LoadCurveClientKeys(own_dir, "workers");
    EXPECT_TRUE(keys.ok()) << keys.status().ToString();
    auto server_pub = LoadCurveClientKeys(dir_, "workers");
    options.socket.curve_server_key = server_pub->server_public_key;
    options.socket.curve_public_key = keys->own.public_key;
    options.socket.curve_secret_key = keys->own.secret_key;
    groups_.push_back(std::make_unique<FakeWorkerGroup>(server_->worker_endpoint(), options));
    return *groups_.back();
  }

  std::string dir_;
  std::unique_ptr<Server> server_;
  std::thread run_;
  std::vector<std::unique_ptr<FakeWorkerGroup>> groups_;
};

TEST_F(ServerCurveTest, ListedKeysAreServedUnlistedOnesGetNothing) {
  auto client = NewClient(dir_, 20s);
  auto health = client->Health();
  ASSERT_TRUE(health.ok()) << health.status().ToString();
  EXPECT_EQ(health->num_worker_groups, 0u);

  // An unlisted worker group never registers (the coordinator still reports none)...
  AddGroup(dir_ + "-stranger");
  auto stranger = NewClient(dir_ + "-stranger", 1500ms);
  // ...and an unlisted client gets no reply at all (its connection is refused in the handshake).
  EXPECT_EQ(stranger->Health().status().code(), StatusCode::kDeadlineExceeded);
  health = client->Health();
  ASSERT_TRUE(health.ok());
  EXPECT_EQ(health->num_worker_groups, 0u) << "an unlisted worker key registered";

  // The listed group registers and serves the listed client.
  AddGroup(dir_);
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (client->Health()->num_worker_groups == 0 && std::chrono::steady_clock::now() < deadline) {
  }
  ASSERT_EQ(client->Health()->num_worker_groups, 1u);
  proto::GenerateRequest request;
  request.prompt_kind = proto::PromptKind::kTokenIds;
  request.prompt_ids = {1, 2, 3};
  request.max_tokens = 4;
  auto result = client->Generate(request);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(result->token_ids[0].size(), 4u);
}

TEST(ServerBindTest, NonLoopbackWithoutKeysIsRefusedUnlessInsecure) {
  ServerOptions options = Options("");
  options.client_endpoint = "tcp://0.0.0.0:*";
  auto refused = Server::Create(options, nullptr);
  ASSERT_EQ(refused.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.status().message().find("tpserve keys init"), std::string::npos) << refused.status().ToString();
  options.insecure = true;
  EXPECT_TRUE(Server::Create(options, nullptr).ok());
  EXPECT_TRUE(Server::Create(Options(""), nullptr).ok());  // loopback needs no keys
}

}  // namespace
}  // namespace tpserve
