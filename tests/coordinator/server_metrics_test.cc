// ServerMetrics: (1) alone, fed a request's life at chosen instants, so every histogram's sum is
// known exactly; (2) inside a real Server with FakeWorkerGroup leaders, driven by N requests and
// by failures of each kind, read back through the `metrics` request and over --metrics-port HTTP.
#include "coordinator/server_metrics.h"

#include <gtest/gtest.h>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <functional>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include "client/client.h"
#include "coordinator/server.h"
#include "tests/coordinator/server_fixture.h"

namespace tpserve {
namespace {

using Clock = std::chrono::steady_clock;

// The value of one series, e.g. Sample(text, "tpserve:e2e_request_latency_seconds_count", "");
// `labels` are those after model_name (",kind=\"x\""). -1 when the series is absent.
double Sample(const std::string& text, const std::string& name, const std::string& labels,
              const std::string& model = "fake") {
  const std::string prefix = name + "{model_name=\"" + model + "\"" + labels + "} ";
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(prefix, 0) == 0) return std::stod(line.substr(prefix.size()));
  }
  return -1;
}

Clock::time_point At(double seconds) {
  return Clock::time_point{} + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

// --- (1) ServerMetrics alone ---------------------------------------------------------------

StepPlan PlanOf(const std::vector<std::pair<uint64_t, int32_t>>& requests_and_tokens) {
  StepPlan plan;
  for (const auto& [request_id, num_tokens] : requests_and_tokens) {
    SequencePlan seq;
    seq.seq_id = SequenceIdOf(request_id, 0);
    seq.token_ids.assign(static_cast<size_t>(num_tokens), 1);
    plan.sequences.push_back(seq);
  }
  return plan;
}

TEST(ServerMetricsTest, RequestPhasesAreMeasuredBetweenTheirEvents) {
  ServerMetrics metrics("fake");
  const std::map<uint32_t, std::unique_ptr<WorkerGroupLink>> no_groups;
  // Request 7: arrives at 10, scheduled at 11 (and again at 11.5: only the first counts), tokens
  // at 11.5, 11.75, 12 (sample 0) and 11.5, 12.5 (sample 1), finishes at 12.5.
  metrics.OnArrival(7, 12, At(10));
  metrics.OnScheduled(PlanOf({{7, 12}}), At(11));
  metrics.OnScheduled(PlanOf({{7, 1}}), At(11.5));
  metrics.OnToken(7, 0, At(11.5));
  metrics.OnToken(7, 1, At(11.5));
  metrics.OnToken(7, 0, At(11.75));
  metrics.OnToken(7, 0, At(12));
  metrics.OnToken(7, 1, At(12.5));
  metrics.OnFinished(7, FinishReason::kLength, At(12.5));
  // Request 8 arrives, is scheduled and fails: no latency observed, a failure counted.
  metrics.OnArrival(8, 5, At(20));
  metrics.OnScheduled(PlanOf({{8, 5}}), At(21));
  metrics.OnFailed(8, proto::ErrorKind::kWorkerLost);
  metrics.OnFailed(0, proto::ErrorKind::kInvalidRequest);
  // Request 9 is cancelled before it was scheduled: e2e only.
  metrics.OnArrival(9, 3, At(30));
  metrics.OnFinished(9, FinishReason::kCancelled, At(30.25));
  EXPECT_EQ(metrics.num_tracked_requests(), 0u);

  const std::string text = metrics.Render(no_groups);
  EXPECT_EQ(Sample(text, "tpserve:time_to_first_token_seconds_count", ""), 1);
  EXPECT_EQ(Sample(text, "tpserve:time_to_first_token_seconds_sum", ""), 1.5);
  EXPECT_EQ(Sample(text, "tpserve:inter_token_latency_seconds_count", ""), 3);
  EXPECT_EQ(Sample(text, "tpserve:inter_token_latency_seconds_sum", ""), 0.25 + 0.25 + 1.0);
  EXPECT_EQ(Sample(text, "tpserve:e2e_request_latency_seconds_count", ""), 2);
  EXPECT_EQ(Sample(text, "tpserve:e2e_request_latency_seconds_sum", ""), 2.5 + 0.25);
  EXPECT_EQ(Sample(text, "tpserve:request_queue_time_seconds_count", ""), 1);
  EXPECT_EQ(Sample(text, "tpserve:request_queue_time_seconds_sum", ""), 1);
  EXPECT_EQ(Sample(text, "tpserve:request_prefill_time_seconds_sum", ""), 0.5);
  EXPECT_EQ(Sample(text, "tpserve:request_decode_time_seconds_sum", ""), 1);
  EXPECT_EQ(Sample(text, "tpserve:prompt_tokens_total", ""), 12);
  EXPECT_EQ(Sample(text, "tpserve:generation_tokens_total", ""), 5);
  EXPECT_EQ(Sample(text, "tpserve:request_success_total", ",finished_reason=\"length\""), 1);
  EXPECT_EQ(Sample(text, "tpserve:request_success_total", ",finished_reason=\"cancelled\""), 1);
  EXPECT_EQ(Sample(text, "tpserve:request_failure_total", ",kind=\"worker_lost\""), 1);
  EXPECT_EQ(Sample(text, "tpserve:request_failure_total", ",kind=\"invalid_request\""), 1);
  EXPECT_EQ(Sample(text, "tpserve:num_worker_groups", ""), 0);
}

TEST(ServerMetricsTest, StepsFeedIterationTokensAndPerGroupTimes) {
  ServerMetrics metrics("fake");
  StepResult result;
  result.compute_ms = 4;
  result.allreduce_ms = 1;
  metrics.OnStepResult(1, PlanOf({{1, 100}, {2, 1}}), result);
  result.compute_ms = 2000;  // into the le="2.5" bucket of group 2
  result.allreduce_ms = 500;
  metrics.OnStepResult(2, PlanOf({{3, 1}}), result);
  const std::string text = metrics.Render({});
  EXPECT_EQ(Sample(text, "tpserve:iteration_tokens_total_count", ""), 2);
  EXPECT_EQ(Sample(text, "tpserve:iteration_tokens_total_sum", ""), 102);
  EXPECT_EQ(Sample(text, "tpserve:iteration_tokens_total_bucket", ",le=\"128\""), 2);
  EXPECT_EQ(Sample(text, "tpserve:iteration_tokens_total_bucket", ",le=\"64\""), 1);
  EXPECT_EQ(Sample(text, "tpserve:worker_step_time_seconds_sum", ",group=\"1\""), 0.004);
  EXPECT_EQ(Sample(text, "tpserve:worker_allreduce_time_seconds_sum", ",group=\"1\""), 0.001);
  EXPECT_EQ(Sample(text, "tpserve:worker_step_time_seconds_bucket", ",group=\"2\",le=\"1\""), 0);
  EXPECT_EQ(Sample(text, "tpserve:worker_step_time_seconds_bucket", ",group=\"2\",le=\"2.5\""), 1);
  EXPECT_EQ(Sample(text, "tpserve:worker_allreduce_time_seconds_count", ",group=\"2\""), 1);
}

// --- (2) inside a Server ------------------------------------------------------------------


// ServerTest's server with its metrics port open, and one client of the raw protocol.
class ServerMetricsServerTest : public ServerTest {
 protected:
  void StartServer(ServerOptions options) {
    options.metrics_host = "127.0.0.1";
    options.metrics_port = 0;
    ServerTest::StartServer(options);
    if (HasFatalFailure()) return;
    client_ = NewClient();
  }

  void TearDown() override {
    client_.reset();
    ServerTest::TearDown();
  }

  void WaitForGroups(uint32_t n) { ServerTest::WaitForGroups(*client_, n); }

  // Sends one request of each and waits for the reply of `kind` to the last: every message before
  // it (finishes, errors) is handed to `on_message`.
  proto::ServerMessage SendAndAwait(const proto::ClientMessage& message, proto::ServerMessageKind kind,
                                    const std::function<void(const proto::ServerMessage&)>& on_message = {}) {
    EXPECT_TRUE(client_->SendRaw(proto::EncodeClientMessage(message)).ok());
    const auto deadline = Clock::now() + kWait;
    while (Clock::now() < deadline) {
      auto reply = client_->Receive(std::chrono::milliseconds(1000));
      if (!reply.ok()) continue;
      if (reply->request_id == message.request_id && reply->kind == kind) return *reply;
      if (on_message) on_message(*reply);
    }
    ADD_FAILURE() << "no reply";
    return {};
  }

  std::string MetricsOverProtocol() {
    proto::ClientMessage m;
    m.kind = proto::ClientMessageKind::kMetrics;
    m.request_id = next_raw_id_++;
    return SendAndAwait(m, proto::ServerMessageKind::kMetrics).metrics.text;
  }

  // GET `target` on the metrics port: (status, body).
  std::pair<int, std::string> HttpGet(const std::string& target) {
    namespace asio = boost::asio;
    namespace http = boost::beast::http;
    asio::io_context io;
    asio::ip::tcp::socket socket(io);
    socket.connect({asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(server_->metrics_port())});
    http::request<http::empty_body> request(http::verb::get, target, 11);
    request.set(http::field::host, "127.0.0.1");
    http::write(socket, request);
    boost::beast::flat_buffer buffer;
    http::response<http::string_body> response;
    http::read(socket, buffer, response);
    return {static_cast<int>(response.result_int()), response.body()};
  }

  // Starts `num` requests (ids from next_raw_id_), waits until each has finished or failed.
  void RunRequests(const std::vector<proto::GenerateRequest>& requests, int* num_finished, int* num_errors) {
    std::set<uint64_t> open;
    for (const proto::GenerateRequest& r : requests) {
      proto::ClientMessage m;
      m.kind = proto::ClientMessageKind::kGenerate;
      m.request_id = next_raw_id_++;
      m.generate = r;
      ASSERT_TRUE(client_->SendRaw(proto::EncodeClientMessage(m)).ok());
      open.insert(m.request_id);
    }
    const auto deadline = Clock::now() + kWait;
    while (!open.empty() && Clock::now() < deadline) {
      auto reply = client_->Receive(std::chrono::milliseconds(1000));
      if (!reply.ok()) continue;
      if (reply->kind == proto::ServerMessageKind::kFinish) {
        ++*num_finished;
        open.erase(reply->request_id);
      } else if (reply->kind == proto::ServerMessageKind::kError) {
        ++*num_errors;
        open.erase(reply->request_id);
      }
    }
    EXPECT_TRUE(open.empty()) << open.size() << " requests never ended";
  }

  std::unique_ptr<Client> client_;
  uint64_t next_raw_id_ = 1;
};

// Every request runs to max_tokens: the counts below are exact.
proto::GenerateRequest IgnoreEosRequest(std::vector<int32_t> prompt, uint32_t max_tokens) {
  proto::GenerateRequest r = IdsRequest(std::move(prompt), max_tokens);
  r.ignore_eos = true;
  return r;
}

TEST_F(ServerMetricsServerTest, NRequestsCountNInEveryRequestHistogram) {
  StartServer({});
  AddGroup();
  WaitForGroups(1);
  constexpr int kRequests = 12;
  constexpr uint32_t kMaxTokens = 7;
  std::mt19937 rng(1234);
  std::vector<proto::GenerateRequest> requests;
  int64_t num_prompt_tokens = 0;
  for (int i = 0; i < kRequests; ++i) {
    std::vector<int32_t> prompt(static_cast<size_t>(3 + rng() % 40));
    for (int32_t& t : prompt) t = static_cast<int32_t>(rng() % (kVocab - 1));
    num_prompt_tokens += static_cast<int64_t>(prompt.size());
    requests.push_back(IgnoreEosRequest(prompt, kMaxTokens));
  }
  int num_finished = 0, num_errors = 0;
  RunRequests(requests, &num_finished, &num_errors);
  ASSERT_EQ(num_finished, kRequests);
  ASSERT_EQ(num_errors, 0);

  const std::string text = MetricsOverProtocol();
  for (const char* histogram :
       {"tpserve:time_to_first_token_seconds", "tpserve:e2e_request_latency_seconds", "tpserve:request_queue_time_seconds",
        "tpserve:request_prefill_time_seconds", "tpserve:request_decode_time_seconds"}) {
    EXPECT_EQ(Sample(text, std::string(histogram) + "_count", ""), kRequests) << histogram;
    EXPECT_EQ(Sample(text, std::string(histogram) + "_bucket", ",le=\"+Inf\""), kRequests) << histogram;
  }
  EXPECT_EQ(Sample(text, "tpserve:inter_token_latency_seconds_count", ""), kRequests * (kMaxTokens - 1));
  EXPECT_EQ(Sample(text, "tpserve:generation_tokens_total", ""), kRequests * kMaxTokens);
  EXPECT_EQ(Sample(text, "tpserve:prompt_tokens_total", ""), num_prompt_tokens);
  EXPECT_EQ(Sample(text, "tpserve:request_success_total", ",finished_reason=\"length\""), kRequests);
  // Every step computes the prompts once and each request's tokens but the last: no preemption here.
  EXPECT_EQ(Sample(text, "tpserve:num_preemptions_total", ""), 0);
  EXPECT_EQ(Sample(text, "tpserve:iteration_tokens_total_sum", ""), num_prompt_tokens + kRequests * (kMaxTokens - 1));
  auto stats = client_->Stats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(Sample(text, "tpserve:iteration_tokens_total_count", ""), static_cast<double>(stats->num_steps_total));
  EXPECT_EQ(Sample(text, "tpserve:worker_step_time_seconds_count", ",group=\"1\""),
            static_cast<double>(stats->num_steps_total));
  EXPECT_EQ(Sample(text, "tpserve:prefix_cache_queries_total", ""), num_prompt_tokens);
  EXPECT_EQ(Sample(text, "tpserve:num_requests_running", ""), 0);
  EXPECT_EQ(Sample(text, "tpserve:num_requests_waiting", ""), 0);
  EXPECT_EQ(Sample(text, "tpserve:kv_cache_usage_perc", ""), 0);
  EXPECT_EQ(Sample(text, "tpserve:num_worker_groups", ""), 1);

  // Idle, the HTTP endpoint renders the same text; other paths are 404.
  auto [status, body] = HttpGet("/metrics");
  EXPECT_EQ(status, 200);
  EXPECT_EQ(body, text);
  EXPECT_EQ(HttpGet("/other").first, 404);
}

TEST_F(ServerMetricsServerTest, PrefixCacheHitsCountCachedPromptTokens) {
  StartServer({});
  AddGroup();  // blocks of 16 tokens
  WaitForGroups(1);
  std::vector<int32_t> prompt(40);
  for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<int32_t>(i % 50);
  int num_finished = 0, num_errors = 0;
  RunRequests({IgnoreEosRequest(prompt, 3)}, &num_finished, &num_errors);
  RunRequests({IgnoreEosRequest(prompt, 3)}, &num_finished, &num_errors);  // after the first: its blocks are cached
  ASSERT_EQ(num_finished, 2);
  const std::string text = MetricsOverProtocol();
  EXPECT_EQ(Sample(text, "tpserve:prefix_cache_queries_total", ""), 80);
  EXPECT_EQ(Sample(text, "tpserve:prefix_cache_hits_total", ""), 32);  // two full blocks of the second
}

TEST_F(ServerMetricsServerTest, FailuresAreCountedByKind) {
  ServerOptions options;
  options.max_live_requests = 4;
  options.max_replays = 0;  // a lost group's requests fail (worker_lost) instead of waiting for a group
  options.heartbeat_interval = std::chrono::milliseconds(50);
  options.heartbeat_timeout = std::chrono::milliseconds(1000);
  options.step_timeout = std::chrono::milliseconds(1000);
  StartServer(options);
  int num_finished = 0, num_errors = 0;
  // No group yet: unavailable.
  RunRequests({IgnoreEosRequest({1, 2, 3}, 4), IgnoreEosRequest({1, 2, 3}, 4)}, &num_finished, &num_errors);
  EXPECT_EQ(num_errors, 2);
  FakeWorkerGroup& group = AddGroup();
  WaitForGroups(1);
  // Invalid: an empty prompt, a token id outside the vocabulary, max_tokens 0.
  RunRequests({IgnoreEosRequest({}, 4), IgnoreEosRequest({kVocab + 5}, 4), IgnoreEosRequest({1}, 0)}, &num_finished,
              &num_errors);
  EXPECT_EQ(num_errors, 5);
  // A hung group: 4 requests are taken (then lost with the group), 2 more are over the limit.
  group.Freeze();
  std::vector<proto::GenerateRequest> six(6, IgnoreEosRequest({1, 2, 3}, 50));
  RunRequests(six, &num_finished, &num_errors);
  EXPECT_EQ(num_errors, 11);
  EXPECT_EQ(num_finished, 0);

  const std::string text = MetricsOverProtocol();
  EXPECT_EQ(Sample(text, "tpserve:request_failure_total", ",kind=\"unavailable\""), 2);
  EXPECT_EQ(Sample(text, "tpserve:request_failure_total", ",kind=\"invalid_request\""), 3);
  EXPECT_EQ(Sample(text, "tpserve:request_failure_total", ",kind=\"overloaded\""), 2);
  EXPECT_EQ(Sample(text, "tpserve:request_failure_total", ",kind=\"worker_lost\""), 4);
  EXPECT_EQ(Sample(text, "tpserve:e2e_request_latency_seconds_count", ""), 0);  // failures observe no latency
  EXPECT_EQ(Sample(text, "tpserve:num_worker_groups", ""), 0);
}

TEST_F(ServerMetricsServerTest, CancelledRequestsFinishAsCancelled) {
  StartServer({});
  FakeWorkerGroup& group = AddGroup();
  WaitForGroups(1);
  proto::ClientMessage generate;
  generate.kind = proto::ClientMessageKind::kGenerate;
  generate.request_id = next_raw_id_++;
  generate.generate = IgnoreEosRequest({1, 2, 3}, 1000);
  generate.generate.stream = true;
  ASSERT_TRUE(client_->SendRaw(proto::EncodeClientMessage(generate)).ok());
  // Wait for its first chunk, hold the group (so the request cannot finish first), then cancel.
  const auto deadline = Clock::now() + kWait;
  bool has_chunk = false;
  while (!has_chunk && Clock::now() < deadline) {
    auto reply = client_->Receive(std::chrono::milliseconds(1000));
    ASSERT_TRUE(!reply.ok() || reply->kind != proto::ServerMessageKind::kError) << reply->error.message;
    has_chunk = reply.ok() && reply->kind == proto::ServerMessageKind::kChunk;
  }
  ASSERT_TRUE(has_chunk);
  group.Freeze();
  proto::ClientMessage cancel;
  cancel.kind = proto::ClientMessageKind::kCancel;
  cancel.request_id = generate.request_id;
  SendAndAwait(cancel, proto::ServerMessageKind::kFinish);
  const std::string text = MetricsOverProtocol();
  EXPECT_EQ(Sample(text, "tpserve:request_success_total", ",finished_reason=\"cancelled\""), 1);
  EXPECT_EQ(Sample(text, "tpserve:e2e_request_latency_seconds_count", ""), 1);
  EXPECT_EQ(Sample(text, "tpserve:time_to_first_token_seconds_count", ""), 1);
}

}  // namespace
}  // namespace tpserve
