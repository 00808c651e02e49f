// The coordinator Server end to end over real ZeroMQ sockets, with FakeWorkerGroup leaders
// (real worker protocol, paged fake model) and the real client library. Synchronises on
// messages: every wait is "receive until this reply arrives" with a deadline.
#include "coordinator/server.h"

#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <optional>
#include <random>
#include <thread>

#include "client/client.h"
#include "model/gguf_file.h"
#include "model/tokenizer.h"
#include "tests/coordinator/fake_prompt_logprobs.h"
#include "tests/coordinator/fake_worker_group.h"
#include "tests/coordinator/server_fixture.h"

namespace tpserve {
namespace {

TEST_F(ServerTest, HealthAndStatsBeforeAndAfterRegistration) {
  StartServer();
  auto client = NewClient();
  auto health = client->Health();
  ASSERT_TRUE(health.ok());
  EXPECT_FALSE(health->ok);
  EXPECT_EQ(health->vocab_size, static_cast<uint32_t>(kVocab));
  // No group yet: a generate request is refused as unavailable (HTTP 503), not queued forever.
  auto refused = client->Generate(IdsRequest({1, 2, 3}, 4));
  EXPECT_EQ(refused.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(refused.status().message().find("unavailable"), std::string::npos) << refused.status().ToString();
  AddGroup();
  WaitForGroups(*client, 1);
  auto stats = client->Stats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->blocks_total, 256u);
  EXPECT_EQ(stats->blocks_free, 256u);
  // Two groups of 256 blocks of 16 tokens, one whole-model group each: 2 x 4096 tokens of f32 KV.
  AddGroup();
  WaitForGroups(*client, 2);
  health = client->Health();
  ASSERT_TRUE(health.ok());
  EXPECT_EQ(health->kv_tokens, 2u * 256 * 16);
  EXPECT_EQ(health->kv_dtype, "f32");
}

// Many concurrent streaming requests of mixed lengths, greedy and seeded, n = 1 and 2: each
// produces exactly the reference ids (what it produces alone), whatever the batch around it.
TEST_F(ServerTest, ConcurrentRequestsEachProduceTheirReferenceIds) {
  StartServer();
  AddGroup();
  auto client = NewClient();
  WaitForGroups(*client, 1);
  std::mt19937 rng(42);
  constexpr int kNumRequests = 64;
  std::map<uint64_t, proto::GenerateRequest> requests;
  for (int i = 0; i < kNumRequests; ++i) {
    proto::GenerateRequest r = IdsRequest(RandomPrompt(rng, 1 + static_cast<int>(rng() % 70)), 1 + rng() % 40);
    if (i % 2 == 1) {
      r.sampling.temperature = 0.8f;
      r.sampling.seed = rng();
      r.sampling.has_seed = true;
    }
    if (i % 5 == 0) r.n = 2;
    auto id = client->Start(r);
    ASSERT_TRUE(id.ok());
    requests[*id] = r;
  }
  std::map<std::pair<uint64_t, uint32_t>, std::vector<int32_t>> ids;
  std::map<std::pair<uint64_t, uint32_t>, proto::Finish> finishes;
  size_t num_expected = 0;
  for (const auto& [id, r] : requests) num_expected += r.n;
  while (finishes.size() < num_expected) {
    auto m = client->Receive(kWait);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    ASSERT_NE(m->kind, proto::ServerMessageKind::kError) << m->error.message;
    if (m->kind == proto::ServerMessageKind::kChunk) {
      auto& v = ids[{m->request_id, m->chunk.sample_index}];
      v.insert(v.end(), m->chunk.token_ids.begin(), m->chunk.token_ids.end());
    } else if (m->kind == proto::ServerMessageKind::kFinish) {
      finishes[{m->request_id, m->finish.sample_index}] = m->finish;
    }
  }
  for (const auto& [id, r] : requests) {
    for (uint32_t s = 0; s < r.n; ++s) {
      // Sample s draws with its own seed (SampleSeed; sample 0 keeps the request's), so seeded
      // samples differ and greedy ones agree.
      SamplingParams sampling = r.sampling;
      sampling.seed = SampleSeed(r.sampling.seed, static_cast<int32_t>(s));
      std::vector<int32_t> expected =
          FakeReference(r.prompt_ids, sampling, static_cast<int32_t>(r.max_tokens), kEos, kVocab);
      EXPECT_EQ((ids[{id, s}]), expected) << "request " << id << " sample " << s;
      const proto::Finish& f = finishes[std::make_pair(id, s)];
      EXPECT_EQ(f.reason, expected.back() == kEos ? proto::FinishReason::kStop : proto::FinishReason::kLength);
      EXPECT_EQ(f.usage.prompt_tokens, r.prompt_ids.size());
      EXPECT_EQ(f.usage.completion_tokens, expected.size());
    }
  }
  proto::StatsReply stats = WaitIdle(*client);
  EXPECT_EQ(stats.blocks_used, 0u);
  EXPECT_EQ(stats.blocks_free + stats.blocks_cached, stats.blocks_total);
  EXPECT_GE(stats.num_generated_tokens, num_expected);
}

// stream = false: one chunk per sample right before its finish, with every id and its logprobs.
TEST_F(ServerTest, NonStreamingSendsOneChunkPerSampleWithLogprobs) {
  StartServer();
  AddGroup();
  auto client = NewClient();
  WaitForGroups(*client, 1);
  proto::GenerateRequest r = IdsRequest({3, 1, 4, 1, 5}, 10);
  r.stream = false;
  r.ignore_eos = true;
  r.n = 2;
  r.sampling.num_logprobs = 2;
  auto id = client->Start(r);
  ASSERT_TRUE(id.ok());
  std::map<uint32_t, int> num_chunks;
  std::map<uint32_t, proto::TokenChunk> chunk_of;
  int num_finished = 0;
  while (num_finished < 2) {
    auto m = client->Receive(kWait);
    ASSERT_TRUE(m.ok());
    ASSERT_EQ(m->request_id, *id);
    if (m->kind == proto::ServerMessageKind::kChunk) {
      ++num_chunks[m->chunk.sample_index];
      chunk_of[m->chunk.sample_index] = m->chunk;
    } else {
      ASSERT_EQ(m->kind, proto::ServerMessageKind::kFinish);
      EXPECT_EQ(num_chunks[m->finish.sample_index], 1) << "the chunk comes before the finish";
      ++num_finished;
    }
  }
  std::vector<int32_t> tokens = r.prompt_ids, expected;
  for (int i = 0; i < 10; ++i) {
    expected.push_back(testing::FakeNextToken(tokens, {}, i, kVocab));
    tokens.push_back(expected.back());
  }
  for (uint32_t s = 0; s < 2; ++s) {
    EXPECT_EQ(num_chunks[s], 1);
    EXPECT_EQ(chunk_of[s].token_ids, expected);
    ASSERT_EQ(chunk_of[s].logprobs.size(), 10u);
    EXPECT_FLOAT_EQ(chunk_of[s].logprobs[3].logprob, -0.5f);
    ASSERT_EQ(chunk_of[s].logprobs[3].top.size(), 2u);
    EXPECT_EQ(chunk_of[s].logprobs[3].top[1].token_id, 1);
  }
}

// Without a seed the coordinator draws a fresh one per request (as vLLM does) and reports it in
// every Finish: two unseeded sampled requests on one prompt get different seeds and different
// tokens, each sample's tokens are the reference for the reported seed, and sending the seed back
// replays the request exactly.
TEST_F(ServerTest, UnseededRequestsDrawFreshSeedsThatReplay) {
  StartServer();
  AddGroup();
  auto client = NewClient();
  WaitForGroups(*client, 1);
  constexpr uint32_t kMaxTokens = 12;
  proto::GenerateRequest r = IdsRequest({3, 1, 4, 1, 5, 9, 2, 6}, kMaxTokens);
  r.ignore_eos = true;
  r.n = 2;
  r.sampling.temperature = 1.0f;
  auto first = client->Generate(r);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  auto second = client->Generate(r);
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  const uint64_t seed = first->finish[0].seed;
  EXPECT_EQ(first->finish[1].seed, seed) << "every sample reports the request's seed";
  EXPECT_NE(second->finish[0].seed, seed);
  EXPECT_NE(second->token_ids[0], first->token_ids[0]);
  for (uint32_t s = 0; s < r.n; ++s) {
    SamplingParams drawn = r.sampling;
    drawn.seed = SampleSeed(seed, static_cast<int32_t>(s));
    EXPECT_EQ(first->token_ids[s], FakeReference(r.prompt_ids, drawn, kMaxTokens, /*eos_id=*/-1, kVocab))
        << "sample " << s;
  }

  proto::GenerateRequest replay = r;
  replay.sampling.seed = seed;
  replay.sampling.has_seed = true;
  auto again = client->Generate(replay);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->token_ids, first->token_ids);
  EXPECT_EQ(again->finish[0].seed, seed);
}

// Two groups (data-parallel replicas): requests spread over both, each still exact.
TEST_F(ServerTest, RequestsSpreadOverSeveralGroups) {
  StartServer();
  FakeWorkerGroup& first = AddGroup();
  FakeWorkerGroup& second = AddGroup();
  auto client = NewClient();
  WaitForGroups(*client, 2);
  std::mt19937 rng(11);
  std::map<uint64_t, proto::GenerateRequest> requests;
  for (int i = 0; i < 16; ++i) {
    proto::GenerateRequest r = IdsRequest(RandomPrompt(rng, 8), 12);
    r.ignore_eos = true;
    auto id = client->Start(r);
    ASSERT_TRUE(id.ok());
    requests[*id] = r;
  }
  std::map<uint64_t, std::vector<int32_t>> ids;
  size_t num_finished = 0;
  while (num_finished < requests.size()) {
    auto m = client->Receive(kWait);
    ASSERT_TRUE(m.ok());
    ASSERT_NE(m->kind, proto::ServerMessageKind::kError) << m->error.message;
    if (m->kind == proto::ServerMessageKind::kChunk) {
      ids[m->request_id].insert(ids[m->request_id].end(), m->chunk.token_ids.begin(), m->chunk.token_ids.end());
    }
    num_finished += m->kind == proto::ServerMessageKind::kFinish;
  }
  for (const auto& [id, r] : requests) {
    std::vector<int32_t> tokens = r.prompt_ids, expected;
    for (int i = 0; i < 12; ++i) {
      expected.push_back(testing::FakeNextToken(tokens, {}, i, kVocab));
      tokens.push_back(expected.back());
    }
    EXPECT_EQ(ids[id], expected);
  }
  EXPECT_GT(first.num_steps(), 0);
  EXPECT_GT(second.num_steps(), 0);
}

TEST_F(ServerTest, ApiKeysAreChecked) {
  ServerOptions options;
  options.api_keys = {"s3cret"};
  StartServer(options);
  AddGroup();
  auto anonymous = NewClient();
  EXPECT_EQ(anonymous->Health().status().code(), StatusCode::kUnauthenticated);
  EXPECT_EQ(anonymous->Generate(IdsRequest({1}, 2)).status().code(), StatusCode::kUnauthenticated);
  ClientOptions client_options;
  client_options.server = server_->client_endpoint();
  client_options.api_key = "s3cret";
  client_options.timeout = kWait;
  auto client = Client::Connect(client_options);
  ASSERT_TRUE(client.ok());
  WaitForGroups(**client, 1);
  EXPECT_TRUE((*client)->Generate(IdsRequest({1}, 2)).ok());
}

TEST_F(ServerTest, AdmissionBeyondTheLimitIsOverloaded) {
  ServerOptions options;
  options.max_live_requests = 2;
  StartServer(options);
  FakeWorkerGroup& group = AddGroup();
  auto client = NewClient();
  WaitForGroups(*client, 1);
  group.Freeze();  // nothing finishes: the first two stay live
  proto::GenerateRequest r = IdsRequest({1, 2}, 5);
  ASSERT_TRUE(client->Start(r).ok());
  ASSERT_TRUE(client->Start(r).ok());
  EXPECT_EQ(client->Generate(r).status().code(), StatusCode::kResourceExhausted);
}

// Cancelling half of the requests mid-stream: they end with reason cancelled, the others with
// their reference ids, and no KV block stays in use.
TEST_F(ServerTest, CancelHalfMidStreamLeaksNoBlocks) {
  StartServer();
  AddGroup();
  auto client = NewClient();
  WaitForGroups(*client, 1);
  std::mt19937 rng(7);
  std::map<uint64_t, proto::GenerateRequest> requests;
  for (int i = 0; i < 32; ++i) {
    proto::GenerateRequest r = IdsRequest(RandomPrompt(rng, 5 + static_cast<int>(rng() % 40)), 200);
    r.ignore_eos = true;
    auto id = client->Start(r);
    ASSERT_TRUE(id.ok());
    requests[*id] = r;
  }
  std::map<uint64_t, std::vector<int32_t>> ids;
  std::map<uint64_t, proto::FinishReason> reasons;
  while (reasons.size() < requests.size()) {
    auto m = client->Receive(kWait);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    ASSERT_NE(m->kind, proto::ServerMessageKind::kError) << m->error.message;
    if (m->kind == proto::ServerMessageKind::kChunk) {
      auto& v = ids[m->request_id];
      const bool first = v.empty();
      v.insert(v.end(), m->chunk.token_ids.begin(), m->chunk.token_ids.end());
      if (first && m->request_id % 2 == 0) {
        ASSERT_TRUE(client->Cancel(m->request_id).ok());
      }
    } else if (m->kind == proto::ServerMessageKind::kFinish) {
      reasons[m->request_id] = m->finish.reason;
    }
  }
  for (const auto& [id, r] : requests) {
    if (id % 2 == 0) {
      EXPECT_EQ(reasons[id], proto::FinishReason::kCancelled) << id;
      EXPECT_LT(ids[id].size(), 200u);
    } else {
      EXPECT_EQ(reasons[id], proto::FinishReason::kLength);
      SamplingParams greedy;
      std::vector<int32_t> tokens = r.prompt_ids;
      std::vector<int32_t> expected;
      for (int i = 0; i < 200; ++i) {
        expected.push_back(testing::FakeNextToken(tokens, greedy, i, kVocab));
        tokens.push_back(expected.back());
      }
      EXPECT_EQ(ids[id], expected) << id;
    }
  }
  proto::StatsReply stats = WaitIdle(*client);
  EXPECT_EQ(stats.num_running, 0u);
  EXPECT_EQ(stats.blocks_used, 0u);
  EXPECT_EQ(stats.blocks_free + stats.blocks_cached, stats.blocks_total);
}

TEST_F(ServerTest, SharedPrefixHitsTheCache) {
  StartServer();
  AddGroup();
  auto client = NewClient();
  WaitForGroups(*client, 1);
  std::mt19937 rng(3);
  std::vector<int32_t> prefix = RandomPrompt(rng, 64);
  std::vector<int32_t> a = prefix, b = prefix;
  a.push_back(1);
  b.push_back(2);
  b.push_back(3);
  auto first = client->Generate(IdsRequest(a, 4));
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(first->finish[0].usage.cached_prompt_tokens, 0u);
  auto second = client->Generate(IdsRequest(b, 4));
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->finish[0].usage.cached_prompt_tokens, 64u);  // four full blocks of 16
  EXPECT_EQ(second->token_ids[0], FakeReference(b, {}, 4, kEos, kVocab));
  auto stats = client->Stats();
  ASSERT_TRUE(stats.ok());
  EXPECT_GT(stats->prefix_hit_rate, 0.4);
  EXPECT_GT(stats->blocks_cached, 0u);
}

TEST_F(ServerTest, InvalidRequestsGetTypedErrorsAndTheServerKeepsServing) {
  StartServer();
  AddGroup();
  auto client = NewClient();
  WaitForGroups(*client, 1);
  auto expect_code = [&](proto::GenerateRequest r, StatusCode code) {
    auto result = client->Generate(r);
    EXPECT_EQ(result.status().code(), code) << result.status().ToString();
  };
  proto::GenerateRequest r = IdsRequest({1, 2, 3}, 4);
  r.sampling.temperature = -1;
  expect_code(r, StatusCode::kInvalidArgument);
  r = IdsRequest({1, kVocab}, 4);
  expect_code(r, StatusCode::kInvalidArgument);
  r = IdsRequest({}, 4);
  expect_code(r, StatusCode::kInvalidArgument);
  r = IdsRequest({1}, 4);
  r.n = 0;
  expect_code(r, StatusCode::kInvalidArgument);
  r.n = 1;
  r.sampling.top_p = std::nanf("");
  expect_code(r, StatusCode::kInvalidArgument);
  r = IdsRequest(std::vector<int32_t>(1024, 5), 4);
  expect_code(r, StatusCode::kOutOfRange);
  r = IdsRequest(std::vector<int32_t>(1000, 5), 100);  // prompt fits, prompt + max_tokens does not
  expect_code(r, StatusCode::kOutOfRange);
  r = IdsRequest({1}, 4);
  r.prompt_kind = proto::PromptKind::kText;
  r.prompt_text = "no tokenizer here";
  expect_code(r, StatusCode::kInvalidArgument);

  // Malformed bytes: an invalid_request error with request id 0, counted as dropped.
  ASSERT_TRUE(client->SendRaw(std::string(13, 'x')).ok());
  auto m = client->Receive(kWait);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->kind, proto::ServerMessageKind::kError);
  EXPECT_EQ(m->error.kind, proto::ErrorKind::kInvalidRequest);
  EXPECT_EQ(m->request_id, 0u);

  // A wrong protocol version.
  proto::ClientMessage wrong;
  wrong.version = 99;
  wrong.request_id = 777;
  wrong.kind = proto::ClientMessageKind::kHealth;
  ASSERT_TRUE(client->SendRaw(proto::EncodeClientMessage(wrong)).ok());
  m = client->Receive(kWait);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->request_id, 777u);
  EXPECT_EQ(m->error.kind, proto::ErrorKind::kInvalidRequest);

  // Oversized: beyond ZMQ_MAXMSGSIZE the connection is dropped by ZeroMQ; the server goes on.
  {
    auto big = NewClient();
    (void)big->SendRaw(std::string(proto::kMaxClientMessageBytes + 64, '\0'));
  }
  auto good = client->Generate(IdsRequest({1, 2, 3}, 5));
  ASSERT_TRUE(good.ok()) << good.status().ToString();
  EXPECT_EQ(good->token_ids[0], FakeReference({1, 2, 3}, {}, 5, kEos, kVocab));
  auto stats = client->Stats();
  ASSERT_TRUE(stats.ok());
  EXPECT_GE(stats->num_messages_dropped, 1u);
  EXPECT_GE(stats->num_requests_rejected, 8u);
}

// A client that goes away mid-stream: its request is cancelled and its blocks freed.
TEST_F(ServerTest, VanishedClientFreesItsBlocks) {
  StartServer();
  AddGroup();
  auto observer = NewClient();
  WaitForGroups(*observer, 1);
  {
    auto client = NewClient();
    proto::GenerateRequest r = IdsRequest({4, 5, 6}, 1000 - 3);
    r.ignore_eos = true;
    ASSERT_TRUE(client->Start(r).ok());
    auto m = client->Receive(kWait);  // the first chunk: the request runs
    ASSERT_TRUE(m.ok());
    ASSERT_EQ(m->kind, proto::ServerMessageKind::kChunk);
  }  // the client's socket closes here
  proto::StatsReply stats = WaitIdle(*observer);
  EXPECT_EQ(stats.num_running, 0u);
  EXPECT_EQ(stats.blocks_used, 0u);
}

// A group that stops answering, with replay off (--max-replays 0): its requests get worker_lost,
// and a new group serves on.
TEST_F(ServerTest, RefusedStepFailsItsRequestOnly) {
  StartServer();
  FakeWorkerGroupOptions options;
  options.poison_token = 61;
  AddGroup(options);
  auto client = NewClient();
  WaitForGroups(*client, 1);
  auto poisoned = client->Generate(IdsRequest({1, 61, 2}, 5));
  EXPECT_EQ(poisoned.status().code(), StatusCode::kInternal) << poisoned.status().ToString();
  auto ok = client->Generate(IdsRequest({1, 2}, 5));
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->token_ids[0], FakeReference({1, 2}, {}, 5, kEos, kVocab));
  proto::StatsReply stats = WaitIdle(*client);
  EXPECT_EQ(stats.blocks_used, 0u);
  EXPECT_EQ(stats.num_worker_groups, 1u);
}

// Drain: running requests finish, new ones are refused, the groups get Shutdown, Run returns OK.
TEST_F(ServerTest, DrainFinishesRunningRefusesNewAndShutsGroupsDown) {
  StartServer();
  FakeWorkerGroup& group = AddGroup();
  auto client = NewClient();
  WaitForGroups(*client, 1);
  proto::GenerateRequest r = IdsRequest({9, 9}, 300);
  r.ignore_eos = true;
  auto id = client->Start(r);
  ASSERT_TRUE(id.ok());
  auto first = client->Receive(kWait);
  ASSERT_TRUE(first.ok());
  server_->RequestDrain();
  auto health = client->Health();  // handled after the drain flag: reports draining
  ASSERT_TRUE(health.ok());
  EXPECT_TRUE(health->draining);
  auto refused = client->Generate(IdsRequest({1}, 2));
  EXPECT_EQ(refused.status().code(), StatusCode::kUnavailable);  // draining: send it elsewhere
  size_t num_ids = first->chunk.token_ids.size();
  bool finished = false;
  while (!finished) {
    auto m = client->Receive(kWait);
    ASSERT_TRUE(m.ok());
    if (m->request_id != *id) continue;
    if (m->kind == proto::ServerMessageKind::kChunk) num_ids += m->chunk.token_ids.size();
    finished = m->kind == proto::ServerMessageKind::kFinish;
  }
  EXPECT_EQ(num_ids, 300u);
  run_.join();
  EXPECT_TRUE(run_status_.ok());
  EXPECT_TRUE(group.WaitShutdown(kWait));
  server_.reset();
}

// Text streaming with SmolLM2's tokenizer: the fake group emits ids over the full vocabulary; the
// streamed text must equal Tokenizer::Decode of the reference ids, cut before the first
// occurrence of a stop string taken from the middle of that text, with finish reason stop.
TEST_F(ServerTest, StreamsDetokenizedTextAndCutsAtStopStrings) {
  const char* kModel = "models/SmolLM2-135M-Instruct.Q4_1.gguf";
  auto file = GgufFile::Open(kModel);
  if (!file.ok()) GTEST_SKIP() << "no " << kModel;
  auto tokenizer = Tokenizer::FromGguf(**file);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status().ToString();
  vocab_ = (*tokenizer)->vocab_size();
  ServerOptions options;
  options.limits = {vocab_, 1024};
  options.eos_id = (*tokenizer)->eos_id();
  StartServer(options, tokenizer->get());
  AddGroup();
  auto client = NewClient();
  WaitForGroups(*client, 1);

  proto::GenerateRequest r;
  r.prompt_kind = proto::PromptKind::kText;
  r.prompt_text = "The quick brown fox";
  r.max_tokens = 40;
  r.ignore_eos = true;
  std::vector<int32_t> prompt = (*tokenizer)->Encode(r.prompt_text, (*tokenizer)->add_bos(), false);
  // Without stop strings: text = Decode(reference ids).
  SamplingParams greedy;
  std::vector<int32_t> tokens = prompt, expected_ids;
  for (int i = 0; i < 40; ++i) {
    expected_ids.push_back(testing::FakeNextToken(tokens, greedy, i, vocab_));
    tokens.push_back(expected_ids.back());
  }
  const std::string full_text = (*tokenizer)->Decode(expected_ids);
  std::string streamed;
  auto plain = client->Generate(r, [&](const proto::TokenChunk& c) {
    streamed += c.text;
    return true;
  });
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  EXPECT_EQ(plain->token_ids[0], expected_ids);
  EXPECT_EQ(plain->text[0], full_text);
  EXPECT_EQ(streamed, full_text);

  // A stop string from the middle of the text.
  ASSERT_GT(full_text.size(), 20u);
  const std::string stop = full_text.substr(full_text.size() / 2, 3);
  r.stop = {stop};
  auto cut = client->Generate(r);
  ASSERT_TRUE(cut.ok()) << cut.status().ToString();
  EXPECT_EQ(cut->text[0], full_text.substr(0, full_text.find(stop)));
  EXPECT_EQ(cut->finish[0].reason, proto::FinishReason::kStop);
  ASSERT_LE(cut->token_ids[0].size(), expected_ids.size());
  EXPECT_TRUE(std::equal(cut->token_ids[0].begin(), cut->token_ids[0].end(), expected_ids.begin()));
  proto::StatsReply stats = WaitIdle(*client);
  EXPECT_EQ(stats.blocks_used, 0u);
}

// Prompt logprobs over the real protocols: one PromptLogprobs message per request (n = 2), before
// any chunk, streamed or not, with the whole prompt (chunked: longer than the 256-token budget) and
// the fake worker's logprob of every token after the first. A scored request reads no cached
// prefix (cached_prompt_tokens 0) but fills the cache for the next one.
TEST_F(ServerTest, PromptLogprobsComeOnceBeforeTheFirstChunk) {
  StartServer();
  AddGroup();
  auto client = NewClient();
  WaitForGroups(*client, 1);
  std::mt19937 rng(8);
  const std::vector<int32_t> prompt = RandomPrompt(rng, 300);
  const std::vector<float> expected = testing::FakePromptLogprobsReference(prompt);
  for (bool stream : {true, false}) {
    SCOPED_TRACE(stream ? "streamed" : "not streamed");
    proto::GenerateRequest r = IdsRequest(prompt, 4);
    r.stream = stream;
    r.ignore_eos = true;
    r.n = 2;
    r.sampling.num_logprobs = 2;
    r.prompt_logprobs = true;
    auto id = client->Start(r);
    ASSERT_TRUE(id.ok());
    std::vector<proto::ServerMessage> messages;
    int num_finished = 0;
    while (num_finished < 2) {
      auto m = client->Receive(kWait);
      ASSERT_TRUE(m.ok()) << m.status().ToString();
      ASSERT_EQ(m->request_id, *id);
      ASSERT_NE(m->kind, proto::ServerMessageKind::kError) << m->error.message;
      if (m->kind == proto::ServerMessageKind::kFinish) {
        ++num_finished;
        EXPECT_EQ(m->finish.usage.cached_prompt_tokens, 0u);
      }
      messages.push_back(*m);
    }
    ASSERT_EQ(messages[0].kind, proto::ServerMessageKind::kPromptLogprobs);
    int num_prompt_messages = 0;
    for (const proto::ServerMessage& m : messages) num_prompt_messages += m.kind == proto::ServerMessageKind::kPromptLogprobs;
    EXPECT_EQ(num_prompt_messages, 1);
    const proto::PromptLogprobs& got = messages[0].prompt_logprobs;
    EXPECT_EQ(got.token_ids, prompt);
    ASSERT_EQ(got.logprobs.size(), expected.size());
    for (size_t i = 0; i < expected.size(); ++i) {
      EXPECT_EQ(got.logprobs[i].logprob, expected[i]) << "position " << i;
      EXPECT_EQ(got.logprobs[i].top.size(), 2u);
    }
  }
  // The scored requests filled the cache: an unscored one hits it (18 full blocks of 16).
  auto plain = client->Generate(IdsRequest(prompt, 2));
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  EXPECT_FALSE(plain->has_prompt_logprobs);
  EXPECT_EQ(plain->finish[0].usage.cached_prompt_tokens, 288u);
  // And the blocking client returns them.
  proto::GenerateRequest scored = IdsRequest(prompt, 2);
  scored.prompt_logprobs = true;
  auto result = client->Generate(scored);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  ASSERT_TRUE(result->has_prompt_logprobs);
  EXPECT_EQ(result->prompt_logprobs.token_ids, prompt);
  ASSERT_EQ(result->prompt_logprobs.logprobs.size(), expected.size());
  EXPECT_EQ(result->prompt_logprobs.logprobs.back().logprob, expected.back());
  EXPECT_EQ(result->finish[0].usage.cached_prompt_tokens, 0u);
  EXPECT_EQ(result->token_ids[0], FakeReference(prompt, {}, 2, kEos, kVocab));
}

}  // namespace
}  // namespace tpserve