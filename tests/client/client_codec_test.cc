#include "comm/client_codec.h"

#include <gtest/gtest.h>

#include <random>

namespace tpserve::proto {
namespace {

ClientMessage FullGenerate() {
  ClientMessage m;
  m.request_id = 0x123456789abcULL;
  m.api_key = "k3y";
  m.kind = ClientMessageKind::kGenerate;
  GenerateRequest& g = m.generate;
  g.prompt_kind = PromptKind::kChat;
  g.chat = {{"system", "be brief"}, {"user", "hi \xc3\xa9"}};
  g.sampling.temperature = 0.7f;
  g.sampling.top_k = 40;
  g.sampling.top_p = 0.9f;
  g.sampling.min_p = 0.05f;
  g.sampling.repetition_penalty = 1.1f;
  g.sampling.presence_penalty = 0.5f;
  g.sampling.frequency_penalty = -0.25f;
  g.sampling.seed = 99;
  g.sampling.has_seed = true;
  g.sampling.logit_bias = {{7, -100.0f}, {9, 2.5f}};
  g.sampling.num_logprobs = 3;
  g.max_tokens = 77;
  g.stop = {"\n\n", "END"};
  g.stop_token_ids = {2, 5};
  g.ignore_eos = true;
  g.stream = false;
  g.n = 2;
  g.priority = -3;
  g.prompt_logprobs = true;
  g.user = "alice";
  return m;
}

TEST(ClientCodecTest, GenerateRoundTripsEveryField) {
  ClientMessage in = FullGenerate();
  std::string bytes = EncodeClientMessage(in);
  ASSERT_EQ(bytes.size() % 8, 0u);
  StatusOr<ClientMessage> out = DecodeClientMessage(bytes.data(), bytes.size());
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(out->version, kClientProtocolVersion);
  EXPECT_EQ(out->request_id, in.request_id);
  EXPECT_EQ(out->api_key, "k3y");
  ASSERT_EQ(out->kind, ClientMessageKind::kGenerate);
  const GenerateRequest& g = out->generate;
  ASSERT_EQ(g.prompt_kind, PromptKind::kChat);
  ASSERT_EQ(g.chat.size(), 2u);
  EXPECT_EQ(g.chat[1].role, "user");
  EXPECT_EQ(g.chat[1].content, "hi \xc3\xa9");
  EXPECT_FLOAT_EQ(g.sampling.temperature, 0.7f);
  EXPECT_EQ(g.sampling.top_k, 40);
  EXPECT_FLOAT_EQ(g.sampling.top_p, 0.9f);
  EXPECT_FLOAT_EQ(g.sampling.min_p, 0.05f);
  EXPECT_FLOAT_EQ(g.sampling.repetition_penalty, 1.1f);
  EXPECT_FLOAT_EQ(g.sampling.presence_penalty, 0.5f);
  EXPECT_FLOAT_EQ(g.sampling.frequency_penalty, -0.25f);
  EXPECT_EQ(g.sampling.seed, 99u);
  EXPECT_TRUE(g.sampling.has_seed);
  EXPECT_EQ(g.sampling.logit_bias, in.generate.sampling.logit_bias);
  EXPECT_EQ(g.sampling.num_logprobs, 3);
  EXPECT_EQ(g.max_tokens, 77u);
  EXPECT_EQ(g.stop, in.generate.stop);
  EXPECT_EQ(g.stop_token_ids, in.generate.stop_token_ids);
  EXPECT_TRUE(g.ignore_eos);
  EXPECT_FALSE(g.stream);
  EXPECT_EQ(g.n, 2u);
  EXPECT_EQ(g.priority, -3);
  EXPECT_TRUE(g.prompt_logprobs);
  EXPECT_EQ(g.user, "alice");
  EXPECT_FALSE(g.beam.enabled());
}

TEST(ClientCodecTest, BeamSearchRoundTrips) {
  ClientMessage in = FullGenerate();
  in.generate.beam = {4, -0.5f, EarlyStopping::kNever};
  std::string bytes = EncodeClientMessage(in);
  StatusOr<ClientMessage> out = DecodeClientMessage(bytes.data(), bytes.size());
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(out->generate.beam.width, 4);
  EXPECT_FLOAT_EQ(out->generate.beam.length_penalty, -0.5f);
  EXPECT_EQ(out->generate.beam.early_stopping, EarlyStopping::kNever);

  ServerMessage fin;
  fin.kind = ServerMessageKind::kFinish;
  fin.finish.beam_score = -0.25;
  fin.finish.cumulative_logprob = -1.75;
  bytes = EncodeServerMessage(fin);
  auto decoded = DecodeServerMessage(bytes.data(), bytes.size());
  ASSERT_TRUE(decoded.ok());
  EXPECT_EQ(decoded->finish.beam_score, -0.25);
  EXPECT_EQ(decoded->finish.cumulative_logprob, -1.75);
}

TEST(ClientCodecTest, SpeculativeRoundTripsAndParses) {
  for (SpeculativeChoice method : {SpeculativeChoice::kServerDefault, SpeculativeChoice::kOff,
                                   SpeculativeChoice::kNgram, SpeculativeChoice::kDraft}) {
    ClientMessage in = FullGenerate();
    in.generate.speculative = {method, method == SpeculativeChoice::kServerDefault ? 0u : 6u};
    const std::string bytes = EncodeClientMessage(in);
    StatusOr<ClientMessage> out = DecodeClientMessage(bytes.data(), bytes.size());
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    EXPECT_EQ(out->generate.speculative.method, method);
    EXPECT_EQ(out->generate.speculative.num_tokens, in.generate.speculative.num_tokens);
  }
  EXPECT_EQ(ParseSpeculativeRequest("draft:6")->method, SpeculativeChoice::kDraft);
  EXPECT_EQ(ParseSpeculativeRequest("draft:6")->num_tokens, 6u);
  EXPECT_EQ(ParseSpeculativeRequest("draft")->num_tokens, 0u);
  EXPECT_EQ(ParseSpeculativeRequest("ngram:2")->method, SpeculativeChoice::kNgram);
  for (const char* bad : {"draft:0", "draft:17", "draftx", "medusa"}) {
    EXPECT_EQ(ParseSpeculativeRequest(bad).status().code(), StatusCode::kInvalidArgument) << bad;
  }
}

TEST(ClientCodecTest, PromptKindsRoundTrip) {
  ClientMessage m;
  m.kind = ClientMessageKind::kGenerate;
  m.generate.prompt_kind = PromptKind::kTokenIds;
  m.generate.prompt_ids = {1, 2, 49151};
  std::string bytes = EncodeClientMessage(m);
  auto out = DecodeClientMessage(bytes.data(), bytes.size());
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(out->generate.prompt_kind, PromptKind::kTokenIds);
  EXPECT_EQ(out->generate.prompt_ids, m.generate.prompt_ids);

  m.generate.prompt_kind = PromptKind::kText;
  m.generate.prompt_text = "Once upon a time";
  bytes = EncodeClientMessage(m);
  out = DecodeClientMessage(bytes.data(), bytes.size());
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(out->generate.prompt_kind, PromptKind::kText);
  EXPECT_EQ(out->generate.prompt_text, "Once upon a time");
  // Defaults of an untouched request survive the trip.
  EXPECT_FLOAT_EQ(out->generate.sampling.top_p, 1.0f);
  EXPECT_FLOAT_EQ(out->generate.sampling.repetition_penalty, 1.0f);
  EXPECT_FALSE(out->generate.sampling.has_seed) << "no seed given: the coordinator draws one";
  EXPECT_EQ(out->generate.n, 1u);
  EXPECT_TRUE(out->generate.stream);
}

TEST(ClientCodecTest, ControlMessagesRoundTrip) {
  for (ClientMessageKind kind : {ClientMessageKind::kCancel, ClientMessageKind::kHealth,
                                 ClientMessageKind::kStats, ClientMessageKind::kHeartbeat}) {
    ClientMessage m;
    m.kind = kind;
    m.request_id = 5;
    std::string bytes = EncodeClientMessage(m);
    auto out = DecodeClientMessage(bytes.data(), bytes.size());
    ASSERT_TRUE(out.ok());
    EXPECT_EQ(out->kind, kind);
    EXPECT_EQ(out->request_id, 5u);
  }
}

// Found by tests/fuzz/client_message_fuzz: text went through std::string's c_str() and ended at
// the first NUL byte (U+0000 is valid UTF-8), so "a\0b" arrived as "a".
TEST(ClientCodecTest, TextWithNulBytesRoundTripsWhole) {
  using namespace std::string_literals;
  ClientMessage m;
  m.kind = ClientMessageKind::kGenerate;
  m.api_key = "\0key"s;
  m.generate.prompt_text = "a\0b"s;
  m.generate.stop = {"x\0y"s};
  std::string bytes = EncodeClientMessage(m);
  auto out = DecodeClientMessage(bytes.data(), bytes.size());
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(out->api_key, "\0key"s);
  EXPECT_EQ(out->generate.prompt_text, "a\0b"s);
  ASSERT_EQ(out->generate.stop.size(), 1u);
  EXPECT_EQ(out->generate.stop[0], "x\0y"s);

  ServerMessage chunk;
  chunk.kind = ServerMessageKind::kChunk;
  chunk.chunk.text = "p\0q"s;
  bytes = EncodeServerMessage(chunk);
  auto back = DecodeServerMessage(bytes.data(), bytes.size());
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->chunk.text, "p\0q"s);
}

TEST(ClientCodecTest, TokenizeAndDetokenizeRequestsRoundTrip) {
  ClientMessage chat;
  chat.kind = ClientMessageKind::kTokenize;
  chat.tokenize.prompt_kind = PromptKind::kChat;
  chat.tokenize.chat = {{"user", "hi"}};
  std::string bytes = EncodeClientMessage(chat);
  auto out = DecodeClientMessage(bytes.data(), bytes.size());
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ASSERT_EQ(out->kind, ClientMessageKind::kTokenize);
  ASSERT_EQ(out->tokenize.prompt_kind, PromptKind::kChat);
  ASSERT_EQ(out->tokenize.chat.size(), 1u);
  EXPECT_EQ(out->tokenize.chat[0].content, "hi");

  ClientMessage text;
  text.kind = ClientMessageKind::kTokenize;
  text.tokenize.prompt_text = "Hello";
  text.tokenize.add_special_tokens = false;
  bytes = EncodeClientMessage(text);
  out = DecodeClientMessage(bytes.data(), bytes.size());
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(out->tokenize.prompt_kind, PromptKind::kText);
  EXPECT_EQ(out->tokenize.prompt_text, "Hello");
  EXPECT_FALSE(out->tokenize.add_special_tokens);

  ClientMessage detok;
  detok.kind = ClientMessageKind::kDetokenize;
  detok.detokenize.token_ids = {1, 2, 40000};
  bytes = EncodeClientMessage(detok);
  out = DecodeClientMessage(bytes.data(), bytes.size());
  ASSERT_TRUE(out.ok());
  ASSERT_EQ(out->kind, ClientMessageKind::kDetokenize);
  EXPECT_EQ(out->detokenize.token_ids, (std::vector<int32_t>{1, 2, 40000}));

  ClientMessage metrics;
  metrics.kind = ClientMessageKind::kMetrics;
  bytes = EncodeClientMessage(metrics);
  out = DecodeClientMessage(bytes.data(), bytes.size());
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(out->kind, ClientMessageKind::kMetrics);
}

TEST(ClientCodecTest, VersionThreeRepliesRoundTrip) {
  ServerMessage p;
  p.kind = ServerMessageKind::kPromptLogprobs;
  p.prompt_logprobs.token_ids = {1, 5, 9};
  p.prompt_logprobs.logprobs = {{-1.5f, {{5, -1.5f}, {6, -2.0f}}}, {-0.25f, {}}};
  std::string bytes = EncodeServerMessage(p);
  auto out = DecodeServerMessage(bytes.data(), bytes.size());
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ASSERT_EQ(out->kind, ServerMessageKind::kPromptLogprobs);
  EXPECT_EQ(out->prompt_logprobs.token_ids, (std::vector<int32_t>{1, 5, 9}));
  ASSERT_EQ(out->prompt_logprobs.logprobs.size(), 2u);
  EXPECT_EQ(out->prompt_logprobs.logprobs[0].logprob, -1.5f);
  ASSERT_EQ(out->prompt_logprobs.logprobs[0].top.size(), 2u);
  EXPECT_EQ(out->prompt_logprobs.logprobs[0].top[1].token_id, 6);

  ServerMessage m;
  m.kind = ServerMessageKind::kMetrics;
  m.metrics.text = "# TYPE tpserve:x counter\ntpserve:x 1\n";
  bytes = EncodeServerMessage(m);
  out = DecodeServerMessage(bytes.data(), bytes.size());
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(out->metrics.text, m.metrics.text);

  ServerMessage t;
  t.kind = ServerMessageKind::kTokenize;
  t.tokenize.token_ids = {3, 4};
  t.tokenize.max_model_len = 8192;
  bytes = EncodeServerMessage(t);
  out = DecodeServerMessage(bytes.data(), bytes.size());
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(out->tokenize.token_ids, (std::vector<int32_t>{3, 4}));
  EXPECT_EQ(out->tokenize.max_model_len, 8192u);

  ServerMessage d;
  d.kind = ServerMessageKind::kDetokenize;
  d.detokenize.text = "caf\xc3\xa9";
  bytes = EncodeServerMessage(d);
  out = DecodeServerMessage(bytes.data(), bytes.size());
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(out->detokenize.text, d.detokenize.text);

  ServerMessage e = MakeErrorMessage(7, ErrorKind::kUnavailable, "no worker group");
  bytes = EncodeServerMessage(e);
  out = DecodeServerMessage(bytes.data(), bytes.size());
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(out->error.kind, ErrorKind::kUnavailable);
  EXPECT_STREQ(ErrorKindName(out->error.kind), "unavailable");
}

TEST(ClientCodecTest, ServerMessagesRoundTrip) {
  ServerMessage chunk;
  chunk.request_id = 11;
  chunk.kind = ServerMessageKind::kChunk;
  chunk.chunk.sample_index = 1;
  chunk.chunk.token_ids = {4, 5};
  chunk.chunk.text = "ab";
  chunk.chunk.logprobs = {{-0.5f, {{4, -0.5f}, {6, -1.5f}}}, {-0.1f, {}}};
  std::string bytes = EncodeServerMessage(chunk);
  auto out = DecodeServerMessage(bytes.data(), bytes.size());
  ASSERT_TRUE(out.ok());
  ASSERT_EQ(out->kind, ServerMessageKind::kChunk);
  EXPECT_EQ(out->chunk.token_ids, chunk.chunk.token_ids);
  EXPECT_EQ(out->chunk.text, "ab");
  ASSERT_EQ(out->chunk.logprobs.size(), 2u);
  EXPECT_EQ(out->chunk.logprobs[0].top[1].token_id, 6);
  EXPECT_FLOAT_EQ(out->chunk.logprobs[0].top[1].logprob, -1.5f);

  ServerMessage fin;
  fin.kind = ServerMessageKind::kFinish;
  fin.finish.reason = FinishReason::kLength;
  fin.finish.usage = {10, 20, 8};
  fin.finish.ttft_ms = 12.5;
  fin.finish.seed = 0xfedcba9876543210ULL;
  bytes = EncodeServerMessage(fin);
  out = DecodeServerMessage(bytes.data(), bytes.size());
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(out->finish.reason, FinishReason::kLength);
  EXPECT_EQ(out->finish.usage.cached_prompt_tokens, 8u);
  EXPECT_DOUBLE_EQ(out->finish.ttft_ms, 12.5);
  EXPECT_EQ(out->finish.seed, 0xfedcba9876543210ULL);

  ServerMessage err = MakeErrorMessage(3, ErrorKind::kWorkerLost, "group 0 lost");
  bytes = EncodeServerMessage(err);
  out = DecodeServerMessage(bytes.data(), bytes.size());
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(out->error.kind, ErrorKind::kWorkerLost);
  EXPECT_EQ(out->error.message, "group 0 lost");

  ServerMessage stats;
  stats.kind = ServerMessageKind::kStats;
  stats.stats.blocks_total = 100;
  stats.stats.prefix_hit_rate = 0.25;
  stats.stats.num_messages_dropped = 4;
  stats.stats.num_preemptions = 9;
  bytes = EncodeServerMessage(stats);
  out = DecodeServerMessage(bytes.data(), bytes.size());
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(out->stats.blocks_total, 100u);
  EXPECT_DOUBLE_EQ(out->stats.prefix_hit_rate, 0.25);
  EXPECT_EQ(out->stats.num_messages_dropped, 4u);
  EXPECT_EQ(out->stats.num_preemptions, 9u);
}

TEST(ClientCodecTest, GarbageAndTruncationAreErrorsNotCrashes) {
  std::string good = EncodeClientMessage(FullGenerate());
  EXPECT_FALSE(DecodeClientMessage(good.data(), 0).ok());
  EXPECT_FALSE(DecodeClientMessage(good.data(), 7).ok());  // not whole words
  for (size_t len = 8; len < good.size(); len += 8) {
    // Truncated: either an error or (if the cut falls past the root's data) a decodable prefix.
    auto out = DecodeClientMessage(good.data(), len);
    (void)out;
  }
  std::mt19937 rng(7);
  int num_errors = 0;
  for (int trial = 0; trial < 2000; ++trial) {
    std::string bytes = good;
    int flips = 1 + trial % 8;
    for (int f = 0; f < flips; ++f) bytes[rng() % bytes.size()] = static_cast<char>(rng());
    auto out = DecodeClientMessage(bytes.data(), bytes.size());
    num_errors += !out.ok();
  }
  EXPECT_GT(num_errors, 0);
  for (int trial = 0; trial < 500; ++trial) {
    std::string bytes(8 * (1 + rng() % 64), '\0');
    for (char& c : bytes) c = static_cast<char>(rng());
    (void)DecodeClientMessage(bytes.data(), bytes.size());
    (void)DecodeServerMessage(bytes.data(), bytes.size());
  }
}

TEST(ClientCodecTest, OversizedListsAreRejected) {
  ClientMessage m;
  m.kind = ClientMessageKind::kGenerate;
  m.generate.stop.assign(kMaxStopStrings + 1, "x");
  std::string bytes = EncodeClientMessage(m);
  auto out = DecodeClientMessage(bytes.data(), bytes.size());
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument);

  std::string huge(kMaxClientMessageBytes + 8, '\0');
  EXPECT_FALSE(DecodeClientMessage(huge.data(), huge.size()).ok());
}

TEST(ClientCodecTest, StatusCodesMapToTypedErrors) {
  EXPECT_EQ(ErrorKindFromStatus(InvalidArgument("x")), ErrorKind::kInvalidRequest);
  EXPECT_EQ(ErrorKindFromStatus(OutOfRange("x")), ErrorKind::kPromptTooLong);
  EXPECT_EQ(ErrorKindFromStatus(ResourceExhausted("x")), ErrorKind::kOverloaded);
  EXPECT_EQ(ErrorKindFromStatus(Unavailable("x")), ErrorKind::kWorkerLost);
  EXPECT_EQ(ErrorKindFromStatus(Internal("x")), ErrorKind::kInternal);
}

}  // namespace
}  // namespace tpserve::proto
