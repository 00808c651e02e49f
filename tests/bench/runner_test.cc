// RunLoad over a scripted fake backend: closed-loop concurrency is respected, token events add up,
// the server's reported total replaces the client's count, errors become failed records, the KV
// cache is sampled while requests are in flight.
#include "bench/loadgen/runner.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <deque>

namespace tpserve::loadgen {
namespace {

// Each request gets 1 + 2 tokens and a finish; request 2's finish reports 4 tokens (the server's
// count wins), request 3 fails instead of finishing. Events come back in the order they were queued.
class FakeBackend : public LoadBackend {
 public:
  StatusOr<ServerInfo> Info() override { return ServerInfo{"fake", 100, 64}; }
  StatusOr<uint64_t> Start(const BenchRequest&) override {
    const uint64_t id = next_id_++;
    max_in_flight_ = std::max(max_in_flight_, ++in_flight_);
    events_.push_back(Event(id, BackendEvent::Kind::kTokens, 1));
    events_.push_back(Event(id, BackendEvent::Kind::kTokens, 2));
    BackendEvent last = Event(id, id == 3 ? BackendEvent::Kind::kError : BackendEvent::Kind::kFinish, 0);
    last.reported_output_tokens = id == 2 ? 4 : -1;
    last.cached_prompt_tokens = static_cast<int32_t>(id);
    last.error = id == 3 ? "boom" : "";
    events_.push_back(last);
    return id;
  }
  void Cancel(uint64_t) override {}
  StatusOr<KvSample> SampleKv() override {  // 1 block of 10 per request in flight, a quarter empty
    EXPECT_GT(in_flight_, 0);
    return KvSample{in_flight_, 10, 0.25};
  }
  StatusOr<BackendEvent> Receive(std::chrono::milliseconds) override {
    if (events_.empty()) return DeadlineExceeded("none");
    BackendEvent e = events_.front();
    events_.pop_front();
    if (e.kind != BackendEvent::Kind::kTokens) --in_flight_;
    return e;
  }
  int64_t max_in_flight() const { return max_in_flight_; }

 private:
  static BackendEvent Event(uint64_t id, BackendEvent::Kind kind, int32_t tokens) {
    BackendEvent e;
    e.request_id = id;
    e.kind = kind;
    e.num_tokens = tokens;
    return e;
  }
  uint64_t next_id_ = 1;
  int64_t in_flight_ = 0, max_in_flight_ = 0;
  std::deque<BackendEvent> events_;
};

TEST(RunnerTest, CountsTokensAndRespectsConcurrency) {
  FakeBackend backend;
  std::vector<BenchRequest> requests(5, BenchRequest{{40, 41}, 3});
  RunOptions options;
  options.concurrency = 2;
  options.progress_every = 1000;
  options.kv_sample_period_s = 0;  // every turn of the loop
  auto result = RunLoad(&backend, requests, options);
  ASSERT_TRUE(result.ok());
  const std::vector<RequestRecord>* records = &result->records;
  ASSERT_EQ(records->size(), 5u);
  EXPECT_EQ(backend.max_in_flight(), 2);
  for (size_t i = 0; i < 5; ++i) {
    const RequestRecord& r = (*records)[i];
    const uint64_t id = i + 1;  // the fake numbers requests in send order, which is dataset order
    EXPECT_EQ(r.ok, id != 3) << i;
    EXPECT_EQ(r.output_len, id == 2 ? 4 : 3) << i;
    EXPECT_EQ(r.itl_s.size(), 1u) << i;
    EXPECT_GE(r.first_token_s, r.send_s);
    EXPECT_EQ(r.prompt_len, 2);
    if (id == 3) {
      EXPECT_EQ(r.error, "boom");
    } else {
      EXPECT_EQ(r.cached_prompt_tokens, static_cast<int32_t>(id));
    }
  }
  ASSERT_FALSE(result->kv_samples.empty());
  const KvSummary kv = SummarizeKv(result->kv_samples);
  EXPECT_DOUBLE_EQ(kv.waste, 0.25);
  EXPECT_DOUBLE_EQ(kv.peak_used_share, 0.2);
}

}  // namespace
}  // namespace tpserve::loadgen
