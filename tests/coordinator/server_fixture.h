// The coordinator Server over real ZeroMQ sockets with FakeWorkerGroup leaders and the real client
// library: the fixture shared by the server tests (server_test.cc, server_replay_test.cc).
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "client/client.h"
#include "coordinator/server.h"
#include "tests/coordinator/fake_worker_group.h"

namespace tpserve {

using testing::FakeReference;
using testing::FakeWorkerGroup;
using testing::FakeWorkerGroupOptions;

using testing::FakeWorkerGroup;
using testing::FakeWorkerGroupOptions;

constexpr int32_t kVocab = 64;
constexpr int32_t kEos = kVocab - 1;
constexpr auto kWait = std::chrono::milliseconds(20000);

class ServerTest : public ::testing::Test {
 protected:
  void StartServer(ServerOptions options = {}, const Tokenizer* tokenizer = nullptr) {
    options.client_endpoint = "tcp://127.0.0.1:*";
    options.worker_endpoint = "tcp://127.0.0.1:*";
    options.model_name = "fake";
    if (options.limits.vocab_size == 0) options.limits = {vocab_, 1024};
    if (options.eos_id < 0) options.eos_id = kEos;
    options.scheduler.max_num_seqs = 64;
    options.scheduler.max_num_batched_tokens = 256;
    options.scheduler.max_model_len = 1024;
    auto server = Server::Create(options, tokenizer);
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    server_ = std::move(*server);
    run_ = std::thread([this] { run_status_ = server_->Run(); });
  }

  void TearDown() override {
    groups_.clear();
    if (server_) {
      server_->RequestStop();
      run_.join();
    }
  }

  FakeWorkerGroup& AddGroup(FakeWorkerGroupOptions options = {}) {
    options.vocab_size = vocab_;
    groups_.push_back(std::make_unique<FakeWorkerGroup>(server_->worker_endpoint(), options));
    return *groups_.back();
  }

  std::unique_ptr<Client> NewClient() {
    ClientOptions options;
    options.server = server_->client_endpoint();
    options.timeout = kWait;
    auto client = Client::Connect(options);
    EXPECT_TRUE(client.ok());
    return std::move(*client);
  }

  // Waits (on health replies) until `n` groups are registered.
  void WaitForGroups(Client& client, uint32_t n) {
    auto deadline = std::chrono::steady_clock::now() + kWait;
    while (std::chrono::steady_clock::now() < deadline) {
      auto health = client.Health();
      ASSERT_TRUE(health.ok()) << health.status().ToString();
      if (health->num_worker_groups == n) return;
    }
    FAIL() << "worker groups never registered";
  }

  // Waits (on stats replies) until nothing runs or waits.
  proto::StatsReply WaitIdle(Client& client) {
    auto deadline = std::chrono::steady_clock::now() + kWait;
    proto::StatsReply stats;
    while (std::chrono::steady_clock::now() < deadline) {
      auto s = client.Stats();
      EXPECT_TRUE(s.ok());
      if (!s.ok()) break;
      stats = *s;
      if (stats.num_running == 0 && stats.num_waiting == 0) break;
    }
    return stats;
  }

  int32_t vocab_ = kVocab;
  std::unique_ptr<Server> server_;
  std::thread run_;
  Status run_status_;
  std::vector<std::unique_ptr<FakeWorkerGroup>> groups_;
};

inline proto::GenerateRequest IdsRequest(std::vector<int32_t> prompt, uint32_t max_tokens) {
  proto::GenerateRequest r;
  r.prompt_kind = proto::PromptKind::kTokenIds;
  r.prompt_ids = std::move(prompt);
  r.max_tokens = max_tokens;
  return r;
}

inline std::vector<int32_t> RandomPrompt(std::mt19937& rng, int len) {
  std::vector<int32_t> p(static_cast<size_t>(len));
  for (auto& t : p) t = static_cast<int32_t>(rng() % (kVocab - 1));
  return p;
}

}  // namespace tpserve
