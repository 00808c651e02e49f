// Load generator pieces against hand-computed values: percentiles (numpy's linear rule), vLLM's
// TPOT / throughput / goodput definitions, seeded datasets and arrival processes.
#include <gtest/gtest.h>

#include <cmath>

#include "bench/loadgen/arrival.h"
#include "bench/loadgen/dataset.h"
#include "bench/loadgen/metrics.h"
#include "bench/loadgen/report.h"

namespace tpserve::loadgen {
namespace {

TEST(PercentileTest, MatchesNumpyLinear) {
  // np.percentile([1, 2, 3, 4], [50, 90, 99]) = 2.5, 3.7, 3.97
  EXPECT_DOUBLE_EQ(Percentile({4, 1, 3, 2}, 50), 2.5);
  EXPECT_NEAR(Percentile({4, 1, 3, 2}, 90), 3.7, 1e-12);
  EXPECT_NEAR(Percentile({4, 1, 3, 2}, 99), 3.97, 1e-12);
  EXPECT_DOUBLE_EQ(Percentile({7}, 99), 7);
  EXPECT_DOUBLE_EQ(Percentile({}, 50), 0);
}

TEST(SummarizeTest, VllmDefinitions) {
  RequestRecord a;  // 5 tokens: TTFT 100 ms, E2E 500 ms -> TPOT 100 ms
  a.ok = true, a.prompt_len = 10, a.output_len = 5, a.send_s = 0, a.first_token_s = 0.1, a.end_s = 0.5;
  a.itl_s = {0.1, 0.1, 0.1, 0.1};
  RequestRecord b;  // 3 tokens: TTFT 300 ms, E2E 1000 ms -> TPOT 350 ms
  b.ok = true, b.prompt_len = 20, b.output_len = 3, b.send_s = 0.5, b.first_token_s = 0.8, b.end_s = 1.5;
  b.itl_s = {0.3, 0.4};
  RequestRecord c;  // one token: no TPOT sample, TPOT 0 for goodput
  c.ok = true, c.prompt_len = 4, c.output_len = 1, c.send_s = 1.0, c.first_token_s = 1.9, c.end_s = 2.0;
  RequestRecord failed;
  failed.error = "overloaded";
  GoodputTargets targets;
  targets.ttft_ms = 400;
  targets.tpot_ms = 200;
  const Summary s = Summarize({a, b, c, failed}, targets);
  EXPECT_EQ(s.num_completed, 3);
  EXPECT_EQ(s.num_failed, 1);
  EXPECT_DOUBLE_EQ(s.duration_s, 2.0);
  EXPECT_EQ(s.total_input_tokens, 34);
  EXPECT_EQ(s.total_output_tokens, 9);
  EXPECT_DOUBLE_EQ(s.request_throughput, 1.5);
  EXPECT_DOUBLE_EQ(s.output_throughput, 4.5);
  EXPECT_DOUBLE_EQ(s.total_token_throughput, 21.5);
  EXPECT_EQ(s.tpot_ms.count, 2);
  EXPECT_NEAR(s.tpot_ms.mean, 225, 1e-9);
  EXPECT_NEAR(s.ttft_ms.median, 300, 1e-9);
  EXPECT_NEAR(s.ttft_ms.max, 900, 1e-9);
  EXPECT_EQ(s.itl_ms.count, 6);
  EXPECT_NEAR(s.e2e_ms.mean, (500.0 + 1000 + 1000) / 3, 1e-9);
  // a meets both (100 <= 400, 100 <= 200); b fails TPOT; c fails TTFT (900 ms).
  EXPECT_DOUBLE_EQ(s.goodput, 0.5);
  EXPECT_LT(Summarize({a}, GoodputTargets{}).goodput, 0);  // no targets: no goodput
}

TEST(SummarizeTest, FailuresByKindWithTheirLatency) {
  RequestRecord rejected1, rejected2, lost, unsent;
  rejected1.error = "RESOURCE_EXHAUSTED: overloaded", rejected1.send_s = 1.0, rejected1.end_s = 1.002;
  rejected2.error = "RESOURCE_EXHAUSTED: overloaded", rejected2.send_s = 2.0, rejected2.end_s = 2.004;
  lost.error = "UNAVAILABLE: worker lost", lost.send_s = 0.5, lost.end_s = 1.5;
  unsent.error = "not sent: time limit reached";  // never sent: no latency
  const Summary s = Summarize({rejected1, rejected2, lost, unsent}, GoodputTargets{});
  EXPECT_EQ(s.num_failed, 4);
  EXPECT_EQ(s.failures.at("RESOURCE_EXHAUSTED"), 2);
  EXPECT_EQ(s.failures.at("UNAVAILABLE"), 1);
  EXPECT_EQ(s.failures.at("not sent"), 1);
  EXPECT_EQ(s.failed_ms.count, 3);
  EXPECT_NEAR(s.failed_ms.min, 2, 1e-6);
  EXPECT_NEAR(s.failed_ms.median, 4, 1e-6);
  EXPECT_NEAR(s.failed_ms.max, 1000, 1e-6);
}

TEST(SummarizeKvTest, WeightedByBlocksInUse) {
  // (0.5 * 2 + 0.1 * 8) / 10 = 0.18; peak 8 of 16 blocks.
  const KvSummary kv = SummarizeKv({{2, 16, 0.5}, {8, 16, 0.1}, {0, 16, 0.9}});
  EXPECT_EQ(kv.num_samples, 3);
  EXPECT_NEAR(kv.waste, 0.18, 1e-12);
  EXPECT_DOUBLE_EQ(kv.peak_used_share, 0.5);
  EXPECT_EQ(SummarizeKv({}).num_samples, 0);
  EXPECT_EQ(SummarizeKv({}).waste, 0);
}

TEST(DatasetTest, RandomLengthsAndSeeding) {
  DatasetOptions o;
  o.num_requests = 200, o.input_len = 64, o.output_len = 32, o.range_ratio = 0.25, o.vocab_size = 1000;
  o.shared_prefix_len = 16, o.seed = 7;
  auto d = MakeDataset(o);
  ASSERT_TRUE(d.ok());
  ASSERT_EQ(d->size(), 200u);
  bool varied = false;
  for (const BenchRequest& r : *d) {
    const int in = static_cast<int>(r.prompt_ids.size()) - 16;
    EXPECT_GE(in, 48);
    EXPECT_LE(in, 80);
    EXPECT_GE(r.output_len, 24);
    EXPECT_LE(r.output_len, 40);
    varied |= r.output_len != (*d)[0].output_len;
    for (int i = 0; i < 16; ++i) EXPECT_EQ(r.prompt_ids[i], (*d)[0].prompt_ids[i]);
    for (int32_t t : r.prompt_ids) {
      EXPECT_GE(t, kFirstPlainToken);
      EXPECT_LT(t, 1000);
    }
  }
  EXPECT_TRUE(varied);
  auto again = MakeDataset(o);
  ASSERT_TRUE(again.ok());
  for (size_t i = 0; i < d->size(); ++i) EXPECT_EQ((*d)[i].prompt_ids, (*again)[i].prompt_ids);
  o.seed = 8;
  auto other = MakeDataset(o);
  ASSERT_TRUE(other.ok());
  EXPECT_NE(other->front().prompt_ids, d->front().prompt_ids);
  o.seed = 7;
  o.token_salt = 3;  // other token ids, the same lengths
  auto salted = MakeDataset(o);
  ASSERT_TRUE(salted.ok());
  for (size_t i = 0; i < d->size(); ++i) {
    EXPECT_EQ((*salted)[i].prompt_ids.size(), (*d)[i].prompt_ids.size());
    EXPECT_EQ((*salted)[i].output_len, (*d)[i].output_len);
  }
  EXPECT_NE(salted->front().prompt_ids, d->front().prompt_ids);
  o.range_ratio = 1.0;
  EXPECT_FALSE(MakeDataset(o).ok());
}

TEST(DatasetTest, ShareGptLikeMeansAndContextBound) {
  DatasetOptions o;
  o.kind = DatasetKind::kShareGptLike;
  o.num_requests = 20000, o.vocab_size = 49152, o.seed = 1;
  auto d = MakeDataset(o);
  ASSERT_TRUE(d.ok());
  double in = 0, out = 0;
  for (const BenchRequest& r : *d) in += r.prompt_ids.size(), out += r.output_len;
  EXPECT_NEAR(in / d->size(), kShareGptInputMean, 0.05 * kShareGptInputMean);
  EXPECT_NEAR(out / d->size(), kShareGptOutputMean, 0.05 * kShareGptOutputMean);
  o.max_model_len = 256, o.num_requests = 2000;
  auto bounded = MakeDataset(o);
  ASSERT_TRUE(bounded.ok());
  for (const BenchRequest& r : *bounded) {
    EXPECT_LE(static_cast<int>(r.prompt_ids.size()) + r.output_len, 256);
    EXPECT_GE(r.output_len, 1);
    EXPECT_GE(r.prompt_ids.size(), 1u);
  }
}

TEST(ArrivalTest, PoissonRateAndBurstiness) {
  const auto t = ArrivalTimes(20000, 50.0, 1.0, 3);
  for (size_t i = 1; i < t.size(); ++i) ASSERT_GE(t[i], t[i - 1]);
  EXPECT_NEAR(t.back() / t.size(), 1.0 / 50, 0.03 / 50);  // mean gap 1/rate
  auto cv = [](const std::vector<double>& times) {  // coefficient of variation of the gaps
    double prev = 0, sum = 0, sq = 0;
    for (double x : times) sum += x - prev, sq += (x - prev) * (x - prev), prev = x;
    const double mean = sum / times.size();
    return std::sqrt(sq / times.size() - mean * mean) / mean;
  };
  EXPECT_NEAR(cv(t), 1.0, 0.05);                                      // exponential: CV 1
  EXPECT_NEAR(cv(ArrivalTimes(20000, 50.0, 0.25, 3)), 2.0, 0.15);   // gamma k: CV 1/sqrt(k)
  EXPECT_EQ(ArrivalTimes(5, INFINITY, 1.0, 3), std::vector<double>(5, 0.0));
  EXPECT_EQ(ArrivalTimes(100, 5.0, 1.0, 9), ArrivalTimes(100, 5.0, 1.0, 9));
}

TEST(ReportTest, JsonCarriesTheNumbers) {
  RequestRecord a;
  a.ok = true, a.prompt_len = 2, a.output_len = 2, a.first_token_s = 0.25, a.end_s = 0.5;
  RunDescription run;
  run.mode = "closed", run.concurrency = 4, run.label = "x";
  const Summary s = Summarize({a}, GoodputTargets{});
  const std::string json = ReportJson(run, s).Dump();
  auto parsed = ParseJson(json);
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(*parsed->GetInt("concurrency"), 4);
  EXPECT_DOUBLE_EQ(*parsed->GetNumber("output_throughput"), 4.0);  // 2 tokens in 0.5 s
  EXPECT_DOUBLE_EQ(*parsed->Find("tpot_ms")->GetNumber("median"), 250.0);
  EXPECT_EQ(parsed->Find("request_goodput"), nullptr);
  EXPECT_NE(FormatReport(run, s).find("Output token throughput (tok/s):"), std::string::npos);
}

}  // namespace
}  // namespace tpserve::loadgen
