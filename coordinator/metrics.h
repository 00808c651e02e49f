// A small Prometheus metrics registry and its text exposition (format 0.0.4), for the coordinator.
// Debian 12 has no prometheus-cpp package, and what the coordinator needs is small: counters,
// gauges and fixed-bucket histograms, each a family of series told apart by labels.
//
//   MetricsRegistry registry({{"model_name", "smollm2"}});          // labels on every series
//   Counter& tokens = registry.AddCounter("tpserve:generation_tokens_total", "Tokens.").Get();
//   Histogram& ttft = registry.AddHistogram("tpserve:time_to_first_token_seconds", "TTFT.", {0.1, 1}).Get();
//   registry.AddCounter("tpserve:request_success_total", "Done.").Get({{"finished_reason", "stop"}}).Inc();
//   std::string text = registry.Render();   // the body of GET /metrics
//
// Families render in the order they were added, their series in label order; a series exists
// from its first Get() on (so a family whose series are all labelled renders only its HELP/TYPE
// lines until then). References returned by Get() stay valid as long as the registry.
// Not thread-safe: the coordinator's single loop owns it (a scrape from another thread goes
// through MetricsExchange).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace tpserve {

// (name, value) pairs; names are valid Prometheus label names, values any UTF-8.
using MetricLabels = std::vector<std::pair<std::string, std::string>>;

class Counter {
 public:
  // REQUIRES: delta >= 0 (a counter never goes down).
  void Inc(double delta = 1);
  double value() const { return value_; }

 private:
  double value_ = 0;
};

class Gauge {
 public:
  void Set(double value) { value_ = value; }
  double value() const { return value_; }

 private:
  double value_ = 0;
};

class Histogram {
 public:
  // REQUIRES: upper_bounds non-empty, strictly increasing and finite (+Inf is implied).
  explicit Histogram(std::vector<double> upper_bounds);
  // Counts `value` in the first bucket whose upper bound is >= value (le: "less or equal").
  void Observe(double value);
  const std::vector<double>& upper_bounds() const { return upper_bounds_; }
  // Per bucket, not cumulative; one more than upper_bounds (the last is +Inf).
  const std::vector<uint64_t>& bucket_counts() const { return bucket_counts_; }
  uint64_t count() const { return count_; }
  double sum() const { return sum_; }

 private:
  std::vector<double> upper_bounds_;
  std::vector<uint64_t> bucket_counts_;
  uint64_t count_ = 0;
  double sum_ = 0;
};

enum class MetricType { kCounter, kGauge, kHistogram };

// All series of one metric name.
template <typename T>
class MetricFamily {
 public:
  MetricFamily(std::string name, std::string help, MetricType type, std::vector<double> upper_bounds)
      : name_(std::move(name)), help_(std::move(help)), type_(type), upper_bounds_(std::move(upper_bounds)) {}

  // The series with these labels (besides the registry's), created at first use.
  // REQUIRES: valid label names, none of them "le" or a registry label.
  T& Get(const MetricLabels& labels = {});

  const std::string& name() const { return name_; }
  const std::string& help() const { return help_; }
  MetricType type() const { return type_; }
  const std::map<MetricLabels, std::unique_ptr<T>>& series() const { return series_; }

 private:
  std::string name_;
  std::string help_;
  MetricType type_;
  std::vector<double> upper_bounds_;  // histograms only
  std::map<MetricLabels, std::unique_ptr<T>> series_;
};

class MetricsRegistry {
 public:
  // `const_labels` go on every series (e.g. vLLM's model_name).
  explicit MetricsRegistry(MetricLabels const_labels = {});
  ~MetricsRegistry();
  MetricsRegistry(const MetricsRegistry&) = delete;
  MetricsRegistry& operator=(const MetricsRegistry&) = delete;

  // REQUIRES: a valid metric name ([a-zA-Z_:][a-zA-Z0-9_:]*) not added before.
  MetricFamily<Counter>& AddCounter(const std::string& name, const std::string& help);
  MetricFamily<Gauge>& AddGauge(const std::string& name, const std::string& help);
  MetricFamily<Histogram>& AddHistogram(const std::string& name, const std::string& help,
                                        std::vector<double> upper_bounds);

  // Text exposition format 0.0.4 (Content-Type: text/plain; version=0.0.4).
  std::string Render() const;

 private:
  struct Entry;
  void CheckNewName(const std::string& name) const;

  MetricLabels const_labels_;
  std::vector<std::unique_ptr<Entry>> entries_;  // in the order added
};

// Helpers of the exposition, exposed for tests.
// A label value with backslash, double quote and newline escaped.
std::string EscapeLabelValue(const std::string& value);
// A sample value: integers without a fraction, "+Inf", "-Inf", "NaN", otherwise shortest round trip.
std::string FormatMetricValue(double value);

}  // namespace tpserve
