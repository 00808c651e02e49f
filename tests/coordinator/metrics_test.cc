// The metrics registry and its text exposition (format 0.0.4), compared with hand-written
// expected text: HELP/TYPE lines, label escaping, cumulative histogram buckets, +Inf, _sum, _count.
#include "coordinator/metrics.h"

#include <gtest/gtest.h>

#include <limits>

namespace tpserve {
namespace {

TEST(MetricsTest, CounterAndGaugeRenderHelpTypeAndValue) {
  MetricsRegistry registry;
  registry.AddCounter("tpserve:prompt_tokens_total", "Prompt tokens.").Get().Inc(3);
  Gauge& gauge = registry.AddGauge("tpserve:kv_cache_usage_perc", "Usage.").Get();
  gauge.Set(0.25);
  EXPECT_EQ(registry.Render(),
            "# HELP tpserve:prompt_tokens_total Prompt tokens.\n"
            "# TYPE tpserve:prompt_tokens_total counter\n"
            "tpserve:prompt_tokens_total 3\n"
            "# HELP tpserve:kv_cache_usage_perc Usage.\n"
            "# TYPE tpserve:kv_cache_usage_perc gauge\n"
            "tpserve:kv_cache_usage_perc 0.25\n");
  gauge.Set(1);
  EXPECT_NE(registry.Render().find("tpserve:kv_cache_usage_perc 1\n"), std::string::npos);
}

TEST(MetricsTest, LabelsConstantFirstThenSeriesInOrderEscaped) {
  MetricsRegistry registry(MetricLabels{{"model_name", "a \"b\"\\c\nd"}});
  MetricFamily<Counter>& failures = registry.AddCounter("x_total", "Help with \\ and\nnewline.");
  failures.Get({{"kind", "overloaded"}}).Inc();
  failures.Get({{"kind", "invalid_request"}}).Inc(2);
  failures.Get({{"kind", "overloaded"}}).Inc();  // the same series again
  EXPECT_EQ(registry.Render(),
            "# HELP x_total Help with \\\\ and\\nnewline.\n"
            "# TYPE x_total counter\n"
            "x_total{model_name=\"a \\\"b\\\"\\\\c\\nd\",kind=\"invalid_request\"} 2\n"
            "x_total{model_name=\"a \\\"b\\\"\\\\c\\nd\",kind=\"overloaded\"} 2\n");
}

TEST(MetricsTest, FamilyWithoutSeriesRendersOnlyHelpAndType) {
  MetricsRegistry registry;
  registry.AddCounter("y_total", "Y.");
  EXPECT_EQ(registry.Render(), "# HELP y_total Y.\n# TYPE y_total counter\n");
}

TEST(MetricsTest, HistogramBucketsAreCumulativeWithInfSumAndCount) {
  MetricsRegistry registry(MetricLabels{{"model_name", "m"}});
  Histogram& h = registry.AddHistogram("lat_seconds", "Latency.", {0.125, 0.5, 2}).Get({{"group", "1"}});
  for (double v : {0.0625, 0.125, 0.25, 0.5, 1.0, 7.0}) h.Observe(v);  // 0.125 and 0.5 fall in their own bucket (le)
  EXPECT_EQ(h.count(), 6u);
  EXPECT_EQ(h.bucket_counts(), (std::vector<uint64_t>{2, 2, 1, 1}));
  EXPECT_EQ(registry.Render(),
            "# HELP lat_seconds Latency.\n"
            "# TYPE lat_seconds histogram\n"
            "lat_seconds_bucket{model_name=\"m\",group=\"1\",le=\"0.125\"} 2\n"
            "lat_seconds_bucket{model_name=\"m\",group=\"1\",le=\"0.5\"} 4\n"
            "lat_seconds_bucket{model_name=\"m\",group=\"1\",le=\"2\"} 5\n"
            "lat_seconds_bucket{model_name=\"m\",group=\"1\",le=\"+Inf\"} 6\n"
            "lat_seconds_sum{model_name=\"m\",group=\"1\"} 8.9375\n"
            "lat_seconds_count{model_name=\"m\",group=\"1\"} 6\n");
}

TEST(MetricsTest, EmptyHistogramRendersZeros) {
  MetricsRegistry registry;
  registry.AddHistogram("h", "H.", {1}).Get();
  EXPECT_EQ(registry.Render(),
            "# HELP h H.\n# TYPE h histogram\nh_bucket{le=\"1\"} 0\nh_bucket{le=\"+Inf\"} 0\nh_sum 0\nh_count 0\n");
}

TEST(MetricsTest, ValuesFormatAsPrometheusParsesThem) {
  EXPECT_EQ(FormatMetricValue(0), "0");
  EXPECT_EQ(FormatMetricValue(42), "42");
  EXPECT_EQ(FormatMetricValue(0.001), "0.001");
  EXPECT_EQ(FormatMetricValue(1.0 / 3), "0.3333333333333333");  // shortest round trip
  EXPECT_EQ(FormatMetricValue(1e21), "1e+21");
  EXPECT_EQ(FormatMetricValue(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(FormatMetricValue(-std::numeric_limits<double>::infinity()), "-Inf");
  EXPECT_EQ(FormatMetricValue(std::numeric_limits<double>::quiet_NaN()), "NaN");
  EXPECT_EQ(EscapeLabelValue("plain"), "plain");
  EXPECT_EQ(EscapeLabelValue("q\"b\\n\n"), "q\\\"b\\\\n\\n");
}

TEST(MetricsDeathTest, ProgrammerErrorsAreCaught) {
  MetricsRegistry registry;
  registry.AddCounter("dup_total", "D.");
  EXPECT_DEATH(registry.AddCounter("dup_total", "D."), "added twice");
  EXPECT_DEATH(registry.AddGauge("1bad", "B."), "1bad");
  EXPECT_DEATH(registry.AddHistogram("h", "H.", {1, 1}), "");
  EXPECT_DEATH(registry.AddCounter("c_total", "C.").Get().Inc(-1), "never goes down");
  EXPECT_DEATH(registry.AddCounter("l_total", "L.").Get({{"le", "1"}}), "le");
}

}  // namespace
}  // namespace tpserve
