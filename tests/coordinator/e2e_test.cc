// End to end: the real coordinator Server, a real worker group (`mpirun -np 2 tpserve-worker`)
// and the real client library, on a synthetic model (9/3 heads, vocab 1001: uneven TP splits) and
// on SmolLM2-135M. Skipped when tpserve-worker is not built. Synchronises on messages only.
//
// What would fail if the system were wrong:
//  - concurrent requests of mixed lengths (greedy and seeded) each produce exactly the ids they
//    produce alone: batching, paging, chunked prefill or sampling that depends on the batch break it;
//  - cancelling half of the requests mid-stream leaves zero KV blocks in use;
//  - a repeated prompt prefix is served from the prefix cache and gives the same ids as cold;
//  - an unseeded sampled request gets a fresh seed, and that seed sent back replays its ids exactly;
//  - prompt logprobs (chunked prefill, n = 2) equal bitwise the logprobs of the same tokens forced;
//  - invalid requests get typed errors and the server keeps serving; Shutdown ends the group (exit 0);
//  - speculative decoding (prompt lookup) on for part of a concurrent batch gives every request the
//    ids it gets with speculation off, greedy and seeded sampling with penalties, 256 tokens each.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <random>
#include <thread>

#include "client/client.h"
#include "coordinator/server.h"
#include "model/gguf_file.h"
#include "model/model_config.h"
#include "model/synthetic_model.h"
#include "model/tokenizer.h"
#include "tests/coordinator/mpi_worker_group.h"

namespace tpserve {
namespace {

constexpr auto kWait = std::chrono::milliseconds(120000);

struct Request {
  proto::GenerateRequest request;
  std::vector<int32_t> ids_alone;
};

class EndToEnd {
 public:
  // Opens `model`, starts a Server and an np-rank worker group whose ranks each get `kv_memory_mb`
  // of KV cache (and `worker_args`); sets `skip` when impossible.
  EndToEnd(const std::string& model, int num_ranks, int kv_memory_mb = 64,
           const std::vector<std::string>& worker_args = {}) {
    worker_binary_ = testing::FindWorkerBinary();
    if (worker_binary_.empty()) {
      skip_reason = "tpserve-worker is not built";
      return;
    }
    auto file = GgufFile::Open(model);
    if (!file.ok()) {
      skip_reason = "no model " + model;
      return;
    }
    auto config = ModelConfigFromGguf(**file);
    EXPECT_TRUE(config.ok());
    config_ = *config;
    auto tokenizer = Tokenizer::FromGguf(**file);
    if (tokenizer.ok()) tokenizer_ = std::move(*tokenizer);
    ServerOptions options;
    options.client_endpoint = "tcp://127.0.0.1:*";
    options.worker_endpoint = "tcp://127.0.0.1:*";
    options.limits = {config_.vocab_size, std::min(config_.context_length, 1024)};
    options.eos_id = config_.eos_id;
    options.eot_id = config_.eot_id;
    options.scheduler.max_model_len = options.limits.context_length;
    options.scheduler.max_num_batched_tokens = 128;  // several steps of chunked prefill
    auto server = Server::Create(options, tokenizer_.get());
    EXPECT_TRUE(server.ok()) << server.status().ToString();
    server_ = std::move(*server);
    run_ = std::thread([this] { run_status_ = server_->Run(); });
    std::vector<std::string> args = {"--kv-memory-mb", std::to_string(kv_memory_mb)};
    args.insert(args.end(), worker_args.begin(), worker_args.end());
    group_ = std::make_unique<testing::MpiWorkerGroup>(worker_binary_, model, server_->worker_endpoint(), num_ranks,
                                                       args);
    ClientOptions client_options;
    client_options.server = server_->client_endpoint();
    client_options.timeout = kWait;
    auto client = Client::Connect(client_options);
    EXPECT_TRUE(client.ok());
    if (client.ok()) client_ = std::move(*client);
  }

  ~EndToEnd() {
    if (!server_) return;
    server_->RequestStop();  // sends Shutdown to the group
    run_.join();
    if (group_) {
      EXPECT_EQ(group_->WaitExit(std::chrono::seconds(30)), 0) << "worker group exit code";
    }
  }

  bool WaitForGroup() {
    const auto deadline = std::chrono::steady_clock::now() + kWait;
    while (std::chrono::steady_clock::now() < deadline) {
      auto health = client_->Health();
      if (!health.ok()) return false;
      if (health->num_worker_groups == 1) return true;
    }
    return false;
  }

  proto::StatsReply WaitIdle() {
    const auto deadline = std::chrono::steady_clock::now() + kWait;
    proto::StatsReply stats;
    while (std::chrono::steady_clock::now() < deadline) {
      auto s = client_->Stats();
      EXPECT_TRUE(s.ok());
      if (!s.ok()) break;
      stats = *s;
      if (stats.num_running == 0 && stats.num_waiting == 0) break;
    }
    return stats;
  }

  // All requests at once on one connection; returns the ids of each (by index).
  std::vector<std::vector<int32_t>> RunConcurrently(const std::vector<Request>& requests) {
    std::map<uint64_t, size_t> index_of;
    for (size_t i = 0; i < requests.size(); ++i) {
      auto id = client_->Start(requests[i].request);
      EXPECT_TRUE(id.ok());
      index_of[*id] = i;
    }
    std::vector<std::vector<int32_t>> ids(requests.size());
    size_t num_done = 0;
    while (num_done < requests.size()) {
      auto m = client_->Receive(kWait);
      EXPECT_TRUE(m.ok()) << m.status().ToString();
      if (!m.ok()) break;
      EXPECT_NE(m->kind, proto::ServerMessageKind::kError) << m->error.message;
      auto it = index_of.find(m->request_id);
      if (it == index_of.end()) continue;
      if (m->kind == proto::ServerMessageKind::kChunk) {
        ids[it->second].insert(ids[it->second].end(), m->chunk.token_ids.begin(), m->chunk.token_ids.end());
      } else if (m->kind == proto::ServerMessageKind::kFinish || m->kind == proto::ServerMessageKind::kError) {
        ++num_done;
      }
    }
    return ids;
  }

  std::vector<Request> MixedRequests(int num_requests, int max_prompt, int max_tokens, uint64_t seed) {
    std::mt19937 rng(static_cast<uint32_t>(seed));
    std::vector<Request> requests(static_cast<size_t>(num_requests));
    for (int i = 0; i < num_requests; ++i) {
      proto::GenerateRequest& r = requests[i].request;
      r.prompt_kind = proto::PromptKind::kTokenIds;
      const int len = 1 + static_cast<int>(rng() % static_cast<uint32_t>(max_prompt));
      for (int t = 0; t < len; ++t) r.prompt_ids.push_back(3 + static_cast<int32_t>(rng() % (config_.vocab_size - 3)));
      r.max_tokens = 1 + rng() % static_cast<uint32_t>(max_tokens);
      if (i % 2 == 1) {
        r.sampling.temperature = 0.9f;
        r.sampling.top_k = 50;
        r.sampling.seed = rng();
        r.sampling.has_seed = true;
      }
    }
    return requests;
  }

  std::string skip_reason;
  std::string worker_binary_;
  ModelConfig config_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<Server> server_;
  std::thread run_;
  Status run_status_;
  std::unique_ptr<testing::MpiWorkerGroup> group_;
  std::unique_ptr<Client> client_;
};

void CheckConcurrentEqualsAlone(EndToEnd& e2e, int num_requests, int max_prompt, int max_tokens) {
  std::vector<Request> requests = e2e.MixedRequests(num_requests, max_prompt, max_tokens, 2024);
  for (Request& r : requests) {
    auto alone = e2e.client_->Generate(r.request);
    ASSERT_TRUE(alone.ok()) << alone.status().ToString();
    r.ids_alone = alone->token_ids[0];
    ASSERT_FALSE(r.ids_alone.empty());
  }
  std::vector<std::vector<int32_t>> together = e2e.RunConcurrently(requests);
  for (size_t i = 0; i < requests.size(); ++i) {
    EXPECT_EQ(together[i], requests[i].ids_alone) << "request " << i << " (temperature "
                                                  << requests[i].request.sampling.temperature << ")";
  }
}

void CheckCancelHalfLeaksNothing(EndToEnd& e2e, int num_requests, uint32_t max_tokens) {
  std::vector<Request> requests = e2e.MixedRequests(num_requests, 20, 1, 77);
  std::map<uint64_t, bool> cancelled;
  for (Request& r : requests) {
    r.request.max_tokens = max_tokens;
    r.request.ignore_eos = true;
    auto id = e2e.client_->Start(r.request);
    ASSERT_TRUE(id.ok());
    cancelled[*id] = false;
  }
  size_t num_done = 0;
  while (num_done < requests.size()) {
    auto m = e2e.client_->Receive(kWait);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    ASSERT_NE(m->kind, proto::ServerMessageKind::kError) << m->error.message;
    auto it = cancelled.find(m->request_id);
    if (it == cancelled.end()) continue;
    if (m->kind == proto::ServerMessageKind::kChunk && m->request_id % 2 == 0 && !it->second) {
      ASSERT_TRUE(e2e.client_->Cancel(m->request_id).ok());
      it->second = true;
    }
    if (m->kind == proto::ServerMessageKind::kFinish) {
      EXPECT_EQ(m->finish.reason, m->request_id % 2 == 0 ? proto::FinishReason::kCancelled : proto::FinishReason::kLength);
      ++num_done;
    }
  }
  proto::StatsReply stats = e2e.WaitIdle();
  EXPECT_EQ(stats.num_running, 0u);
  EXPECT_EQ(stats.blocks_used, 0u);
  EXPECT_EQ(stats.blocks_free + stats.blocks_cached, stats.blocks_total);
}

void CheckPrefixCache(EndToEnd& e2e, int block_multiple) {
  std::mt19937 rng(5);
  std::vector<int32_t> prefix;
  for (int i = 0; i < block_multiple; ++i) prefix.push_back(3 + static_cast<int32_t>(rng() % 200));
  proto::GenerateRequest b;
  b.prompt_kind = proto::PromptKind::kTokenIds;
  b.prompt_ids = prefix;
  b.prompt_ids.push_back(7);
  b.max_tokens = 8;
  b.ignore_eos = true;
  auto cold = e2e.client_->Generate(b);
  ASSERT_TRUE(cold.ok()) << cold.status().ToString();
  EXPECT_EQ(cold->finish[0].usage.cached_prompt_tokens, 0u);
  proto::GenerateRequest a = b;
  a.prompt_ids.back() = 9;
  auto other = e2e.client_->Generate(a);
  ASSERT_TRUE(other.ok());
  EXPECT_GT(other->finish[0].usage.cached_prompt_tokens, 0u);
  auto warm = e2e.client_->Generate(b);
  ASSERT_TRUE(warm.ok());
  EXPECT_GT(warm->finish[0].usage.cached_prompt_tokens, 0u);
  EXPECT_EQ(warm->token_ids[0], cold->token_ids[0]);
  auto stats = e2e.client_->Stats();
  ASSERT_TRUE(stats.ok());
  EXPECT_GT(stats->prefix_hit_rate, 0.0);
}

// Unseeded sampled requests draw fresh seeds (reported in the finish); the reported seed sent back
// replays the request's ids exactly through the real worker group.
void CheckUnseededRequestsReplay(EndToEnd& e2e) {
  proto::GenerateRequest r;
  r.prompt_kind = proto::PromptKind::kTokenIds;
  r.prompt_ids = {5, 17, 42, 99, 7, 300};
  r.max_tokens = 12;
  r.ignore_eos = true;
  r.sampling.temperature = 1.0f;
  auto first = e2e.client_->Generate(r);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  auto second = e2e.client_->Generate(r);
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_NE(first->finish[0].seed, second->finish[0].seed);
  proto::GenerateRequest replay = r;
  replay.sampling.seed = first->finish[0].seed;
  replay.sampling.has_seed = true;
  auto again = e2e.client_->Generate(replay);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->token_ids[0], first->token_ids[0]);
  EXPECT_EQ(again->finish[0].seed, first->finish[0].seed);
}

// Prompt logprobs through the real group: a prompt longer than the 128-token step budget (so its
// prefill is chunked) scored with n = 2 gives one logprob per token after the first, and at each
// checked position it is bitwise the logprob the engine reports when a request made of the prompt
// up to there is forced (logit bias +100) to generate that token, from the prefix cache or not.
void CheckPromptLogprobsEqualForcedTokens(EndToEnd& e2e, int prompt_len) {
  std::mt19937 rng(31);
  proto::GenerateRequest r;
  r.prompt_kind = proto::PromptKind::kTokenIds;
  for (int t = 0; t < prompt_len; ++t) r.prompt_ids.push_back(3 + static_cast<int32_t>(rng() % (e2e.config_.vocab_size - 3)));
  r.max_tokens = 2;
  r.n = 2;
  r.sampling.num_logprobs = 3;
  r.prompt_logprobs = true;
  auto scored = e2e.client_->Generate(r);
  ASSERT_TRUE(scored.ok()) << scored.status().ToString();
  ASSERT_TRUE(scored->has_prompt_logprobs);
  const std::vector<int32_t>& prompt = scored->prompt_logprobs.token_ids;
  ASSERT_EQ(prompt, r.prompt_ids);
  ASSERT_EQ(scored->prompt_logprobs.logprobs.size(), prompt.size() - 1);
  for (const proto::TokenLogprobs& lp : scored->prompt_logprobs.logprobs) {
    EXPECT_LE(lp.logprob, 0.0f);
    ASSERT_EQ(lp.top.size(), 3u);
    EXPECT_GE(lp.top[0].logprob, lp.logprob);
  }
  for (int i : {0, 1, 126, 127, 128, prompt_len - 2}) {
    proto::GenerateRequest forced;
    forced.prompt_kind = proto::PromptKind::kTokenIds;
    forced.prompt_ids.assign(prompt.begin(), prompt.begin() + i + 1);
    forced.max_tokens = 1;
    forced.ignore_eos = true;
    forced.sampling.num_logprobs = 3;
    forced.sampling.logit_bias = {{prompt[i + 1], 100.0f}};
    auto got = e2e.client_->Generate(forced);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    ASSERT_EQ(got->token_ids[0], std::vector<int32_t>{prompt[i + 1]}) << "position " << i;
    ASSERT_EQ(got->logprobs[0].size(), 1u);
    const proto::TokenLogprobs& want = scored->prompt_logprobs.logprobs[i];
    EXPECT_EQ(got->logprobs[0][0].logprob, want.logprob) << "position " << i;
    for (size_t k = 0; k < want.top.size(); ++k) {
      EXPECT_EQ(got->logprobs[0][0].top[k].token_id, want.top[k].token_id) << "position " << i;
      EXPECT_EQ(got->logprobs[0][0].top[k].logprob, want.top[k].logprob) << "position " << i;
    }
  }
}

void CheckErrorsKeepServing(EndToEnd& e2e) {
  proto::GenerateRequest bad;
  bad.prompt_kind = proto::PromptKind::kTokenIds;
  bad.prompt_ids = {1, e2e.config_.vocab_size};
  EXPECT_EQ(e2e.client_->Generate(bad).status().code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(e2e.client_->SendRaw("garbage!").ok());
  auto m = e2e.client_->Receive(kWait);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->error.kind, proto::ErrorKind::kInvalidRequest);
  bad.prompt_ids = {5, 6, 7};
  bad.max_tokens = 3;
  auto good = e2e.client_->Generate(bad);
  ASSERT_TRUE(good.ok()) << good.status().ToString();
}

class EndToEndTest : public ::testing::Test {
 protected:
  static std::string SyntheticModelName() {
    return (std::filesystem::temp_directory_path() / ("tpserve_e2e_" + std::to_string(getpid()) + ".gguf")).string();
  }
  static void TearDownTestSuite() {
    std::filesystem::remove(SyntheticModelName());
    std::filesystem::remove(SyntheticModelName() + ".gemma3");
  }
  // Gemma 3's shape: 5 sliding layers (4-key window) and 1 full, one KV head; 2,048 positions.
  static std::string Gemma3ModelPath() {
    static const std::string path = [] {
      SyntheticModelOptions options;
      options.config = *SyntheticPreset("gemma3-tiny");
      options.config.context_length = 2048;
      options.seed = 13;
      const std::string p = SyntheticModelName() + ".gemma3";
      Status written = WriteSyntheticGguf(options, p);
      EXPECT_TRUE(written.ok()) << written.ToString();
      return p;
    }();
    return path;
  }
  // Written once per test binary, removed after the suite.
  static std::string SyntheticModelPath() {
    static const std::string path = [] {
      SyntheticModelOptions options;
      options.config = *SyntheticPreset("tiny");
      options.config.hidden_size = 144;
      options.config.num_heads = 9;
      options.config.num_kv_heads = 3;
      options.config.head_dim = 16;
      options.config.ffn_size = 192;
      options.config.vocab_size = 1001;
      options.config.context_length = 512;
      options.config.bos_id = 1;
      options.config.eos_id = 2;
      options.seed = 11;
      const std::string p = SyntheticModelName();
      Status written = WriteSyntheticGguf(options, p);
      EXPECT_TRUE(written.ok()) << written.ToString();
      return p;
    }();
    return path;
  }
};

// The same requests twice, concurrently: speculation off for all, then `method` (prompt lookup, or
// the group's draft model; k 2..5) for two in three of them. Every request's ids must be the same;
// proposals must have been verified (and, where they can be right, kept), and nothing stays in use.
void CheckSpeculationKeepsTheIds(EndToEnd& e2e, const std::vector<proto::GenerateRequest>& requests,
                                 bool expect_accepted,
                                 proto::SpeculativeChoice method = proto::SpeculativeChoice::kNgram) {
  std::vector<Request> plain(requests.size()), mixed(requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    plain[i].request = mixed[i].request = requests[i];
    plain[i].request.speculative.method = proto::SpeculativeChoice::kOff;
    mixed[i].request.speculative.method = i % 3 != 2 ? method : proto::SpeculativeChoice::kOff;
    mixed[i].request.speculative.num_tokens = 2 + static_cast<uint32_t>(i % 4);
  }
  const proto::StatsReply before = e2e.WaitIdle();
  const std::vector<std::vector<int32_t>> plain_ids = e2e.RunConcurrently(plain);
  const std::vector<std::vector<int32_t>> mixed_ids = e2e.RunConcurrently(mixed);
  for (size_t i = 0; i < requests.size(); ++i) {
    EXPECT_EQ(mixed_ids[i], plain_ids[i]) << "request " << i << (i % 3 != 2 ? " (speculative)" : " (plain)");
    EXPECT_EQ(plain_ids[i].size(), requests[i].max_tokens) << "request " << i;
  }
  const proto::StatsReply after = e2e.WaitIdle();
  EXPECT_GT(after.num_draft_tokens, before.num_draft_tokens);
  if (expect_accepted) {
    EXPECT_GT(after.num_accepted_tokens, before.num_accepted_tokens);
  }
  EXPECT_EQ(after.blocks_used, 0u);
  // One alone, for its Finish: the counts of what it verified and kept, and again the same ids.
  auto alone = e2e.client_->Generate(mixed[0].request);
  ASSERT_TRUE(alone.ok()) << alone.status().ToString();
  EXPECT_EQ(alone->token_ids[0], plain_ids[0]);
  EXPECT_GT(alone->finish[0].num_draft_tokens, 0u);
  EXPECT_LE(alone->finish[0].num_accepted_tokens, alone->finish[0].num_draft_tokens);
}

// Mixed synthetic requests of 256 tokens (the random model falls into loops, so some proposals
// are right), half of them sampled with penalties.
std::vector<proto::GenerateRequest> LongMixedRequests(EndToEnd& e2e) {
  std::vector<proto::GenerateRequest> requests;
  for (Request& r : e2e.MixedRequests(6, 60, 1, 31)) {
    r.request.max_tokens = 256;
    r.request.ignore_eos = true;
    if (r.request.sampling.temperature > 0) {
      r.request.sampling.repetition_penalty = 1.1f;
      r.request.sampling.frequency_penalty = 0.2f;
      r.request.sampling.top_p = 0.9f;
    }
    requests.push_back(r.request);
  }
  return requests;
}

TEST_F(EndToEndTest, SyntheticModelSpeculationKeepsTheIdsAtTp1AndTp2) {
  for (int tp : {1, 2}) {
    SCOPED_TRACE("TP " + std::to_string(tp));
    EndToEnd e2e(SyntheticModelPath(), tp);
    if (!e2e.skip_reason.empty()) GTEST_SKIP() << e2e.skip_reason;
    ASSERT_TRUE(e2e.WaitForGroup()) << "the worker group never registered";
    CheckSpeculationKeepsTheIds(e2e, LongMixedRequests(e2e), /*expect_accepted=*/false);
  }
}

// Speculation by a draft model of the same vocabulary loaded by the group (tpserve-worker
// --draft-model): the target itself at TP 1 (every proposal right, sampled ones too), and a smaller
// random model at TP 2 (mostly wrong). The ids are plain decoding's either way.
TEST_F(EndToEndTest, SyntheticDraftModelKeepsTheIdsAtTp1AndTp2) {
  const std::string draft = SyntheticModelName() + ".draft";
  SyntheticModelOptions options;
  options.config = *SyntheticPreset("tiny");
  options.config.num_layers = 1;
  options.config.vocab_size = 1001;
  options.config.context_length = 512;
  options.seed = 12;
  ASSERT_TRUE(WriteSyntheticGguf(options, draft).ok());
  for (int tp : {1, 2}) {
    SCOPED_TRACE("TP " + std::to_string(tp));
    EndToEnd e2e(SyntheticModelPath(), tp, 64, {"--draft-model", tp == 1 ? SyntheticModelPath() : draft});
    if (!e2e.skip_reason.empty()) GTEST_SKIP() << e2e.skip_reason;
    ASSERT_TRUE(e2e.WaitForGroup()) << "the worker group never registered";
    CheckSpeculationKeepsTheIds(e2e, LongMixedRequests(e2e), /*expect_accepted=*/tp == 1,
                                proto::SpeculativeChoice::kDraft);
  }
  std::filesystem::remove(draft);
}

TEST_F(EndToEndTest, SyntheticModelTp2) {
  const std::string model = SyntheticModelPath();
  EndToEnd e2e(model, 2);
  if (!e2e.skip_reason.empty()) GTEST_SKIP() << e2e.skip_reason;
  ASSERT_TRUE(e2e.WaitForGroup()) << "the worker group never registered";
  CheckConcurrentEqualsAlone(e2e, 24, 60, 24);
  CheckCancelHalfLeaksNothing(e2e, 16, 64);
  CheckPrefixCache(e2e, 48);
  CheckUnseededRequestsReplay(e2e);
  CheckPromptLogprobsEqualForcedTokens(e2e, 200);
  CheckErrorsKeepServing(e2e);
}

// 64 concurrent requests on a KV cache too small for them all (1 MiB per rank: 128 blocks of 16
// tokens, against ~8 blocks per request on average): the scheduler must preempt running sequences and
// recompute them later, and every request still produces exactly its solo ids.
TEST_F(EndToEndTest, SyntheticModelTp2PreemptsUnderKvPressure) {
  const std::string model = SyntheticModelPath();
  EndToEnd e2e(model, 2, /*kv_memory_mb=*/1);
  if (!e2e.skip_reason.empty()) GTEST_SKIP() << e2e.skip_reason;
  ASSERT_TRUE(e2e.WaitForGroup()) << "the worker group never registered";
  CheckConcurrentEqualsAlone(e2e, 64, 200, 48);
  const proto::StatsReply stats = e2e.WaitIdle();
  EXPECT_GT(stats.num_preemptions, 0u) << "the cache was meant to run out (" << stats.blocks_total << " blocks)";
  EXPECT_EQ(stats.blocks_used, 0u);
}

// Sliding-window layers' pages freed (the worker's default, --sliding-kv free) against kept, on 1 MiB
// of KV per rank (keep: 42 blocks of 16 tokens x 6 layers; free: 256 pages of 1 layer): mixed
// concurrent requests give the same ids either way; a 1,000-token sequence does not fit the kept
// layout (refused, OUT_OF_RANGE) and is served by the freed one with the ids the kept layout gives it
// on 4 MiB; prefix hits work across the released pages; nothing stays in use.
TEST_F(EndToEndTest, SyntheticGemma3FreesSlidingPagesWithTheSameIds) {
  struct Run {
    const char* mode;
    int kv_memory_mb;
    bool long_fits;
  };
  std::vector<Request> requests;
  proto::GenerateRequest long_request;
  std::vector<std::vector<int32_t>> mixed_ids;
  std::vector<int32_t> long_ids;
  for (const Run& run : {Run{"keep", 4, true}, Run{"keep", 1, false}, Run{"free", 1, true}}) {
    SCOPED_TRACE(std::string(run.mode) + " " + std::to_string(run.kv_memory_mb) + " MiB");
    EndToEnd e2e(Gemma3ModelPath(), 2, run.kv_memory_mb, {"--sliding-kv", run.mode});
    if (!e2e.skip_reason.empty()) GTEST_SKIP() << e2e.skip_reason;
    ASSERT_TRUE(e2e.WaitForGroup()) << "the worker group never registered";
    if (requests.empty()) {
      requests = e2e.MixedRequests(16, 60, 32, 99);
      long_request = e2e.MixedRequests(1, 1, 1, 5)[0].request;
      std::mt19937 rng(8);
      long_request.prompt_ids.clear();
      for (int t = 0; t < 900; ++t) long_request.prompt_ids.push_back(3 + static_cast<int32_t>(rng() % 290));
      long_request.max_tokens = 100;
      long_request.ignore_eos = true;
    }
    // Pages of 6 layers (keep) or of 1 layer in 6 groups (free): the same tokens for every layer.
    auto health = e2e.client_->Health();
    ASSERT_TRUE(health.ok());
    EXPECT_EQ(health->kv_tokens, (run.kv_memory_mb << 20) / (6 * 2 * 32 * 4 * 16) * 16u) << health->kv_tokens;
    EXPECT_EQ(health->kv_dtype, "f32");
    const std::vector<std::vector<int32_t>> ids = e2e.RunConcurrently(requests);
    if (mixed_ids.empty()) mixed_ids = ids;
    EXPECT_EQ(ids, mixed_ids);
    auto long_answer = e2e.client_->Generate(long_request);
    if (!run.long_fits) {
      ASSERT_FALSE(long_answer.ok());
      EXPECT_EQ(long_answer.status().code(), StatusCode::kOutOfRange) << long_answer.status().ToString();
    } else {
      ASSERT_TRUE(long_answer.ok()) << long_answer.status().ToString();
      if (long_ids.empty()) long_ids = long_answer->token_ids[0];
      EXPECT_EQ(long_answer->token_ids[0], long_ids);
      EXPECT_EQ(long_ids.size(), 100u);
    }
    CheckPrefixCache(e2e, 48);
    EXPECT_EQ(e2e.WaitIdle().blocks_used, 0u);
  }
}

TEST_F(EndToEndTest, SmolLM2Tp2) {
#ifdef __SANITIZE_ADDRESS__
  GTEST_SKIP() << "too slow under the sanitizers; the synthetic-model test covers the same paths";
#endif
  EndToEnd e2e("models/SmolLM2-135M-Instruct.Q4_1.gguf", 2);
  if (!e2e.skip_reason.empty()) GTEST_SKIP() << e2e.skip_reason;
  ASSERT_TRUE(e2e.WaitForGroup()) << "the worker group never registered";
  CheckConcurrentEqualsAlone(e2e, 8, 24, 8);
  CheckCancelHalfLeaksNothing(e2e, 8, 16);
  CheckPrefixCache(e2e, 32);
  CheckPromptLogprobsEqualForcedTokens(e2e, 150);
  // Text in, text out through the tokenizer and the chat format.
  proto::GenerateRequest chat;
  chat.prompt_kind = proto::PromptKind::kChat;
  // This small quantised model's answer depends on the system message (with its own default one, or
  // "You are a helpful assistant.", it answers in French); this one keeps the check about our
  // plumbing (template, special tokens, EOT stop).
  chat.chat = {{"system", "Answer in English."}, {"user", "What is the capital of France?"}};
  chat.max_tokens = 12;
  auto answer = e2e.client_->Generate(chat);
  ASSERT_TRUE(answer.ok()) << answer.status().ToString();
  EXPECT_NE(answer->text[0].find("Paris"), std::string::npos) << answer->text[0];
  EXPECT_EQ(answer->text[0].find("<|im_end|>"), std::string::npos) << answer->text[0];

  // A text to repeat (prompt lookup's case), greedy and seeded sampling with penalties.
  std::vector<proto::GenerateRequest> repeat(4);
  for (size_t i = 0; i < repeat.size(); ++i) {
    proto::GenerateRequest& r = repeat[i];
    r.prompt_kind = proto::PromptKind::kChat;
    r.chat = {{"user", "Copy this text exactly, twice:\n\nThe quick brown fox jumps over the lazy dog. "
                       "A journey of a thousand miles begins with a single step. Sample " + std::to_string(i) + "."}};
    r.max_tokens = 256;
    r.ignore_eos = true;
    if (i % 2 == 1) {
      r.sampling.temperature = 0.7f;
      r.sampling.top_p = 0.9f;
      r.sampling.repetition_penalty = 1.05f;
      r.sampling.seed = 100 + i;
      r.sampling.has_seed = true;
    }
  }
  CheckSpeculationKeepsTheIds(e2e, repeat, /*expect_accepted=*/true);
}

}  // namespace
}  // namespace tpserve
