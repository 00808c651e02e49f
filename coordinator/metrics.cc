#include "coordinator/metrics.h"

#include <charconv>
#include <cmath>
#include <type_traits>
#include <variant>

#include "common/check.h"

namespace tpserve {
namespace {

bool IsValidName(const std::string& name, bool allow_colon) {
  if (name.empty()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (allow_colon && c == ':') ||
                    (i > 0 && c >= '0' && c <= '9');
    if (!ok) return false;
  }
  return true;
}

// HELP text escapes backslash and newline only (the exposition format's rule).
std::string EscapeHelp(const std::string& help) {
  std::string out;
  for (char c : help) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

// {a="x",b="y"} of the registry's labels, the series' labels and an optional le, or "" if none.
std::string LabelText(const MetricLabels& const_labels, const MetricLabels& labels, const std::string* le) {
  std::string out;
  auto add = [&out](const std::string& name, const std::string& value) {
    out += out.empty() ? "{" : ",";
    out += name + "=\"" + EscapeLabelValue(value) + "\"";
  };
  for (const auto& [name, value] : const_labels) add(name, value);
  for (const auto& [name, value] : labels) add(name, value);
  if (le != nullptr) add("le", *le);
  if (!out.empty()) out += "}";
  return out;
}

const char* TypeName(MetricType type) {
  switch (type) {
    case MetricType::kCounter: return "counter";
    case MetricType::kGauge: return "gauge";
    case MetricType::kHistogram: return "histogram";
  }
  return "untyped";
}

}  // namespace

std::string EscapeLabelValue(const std::string& value) {
  std::string out;
  for (char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string FormatMetricValue(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  char buffer[64];
  std::to_chars_result r = std::to_chars(buffer, buffer + sizeof buffer, value);  // shortest round trip
  CHECK(r.ec == std::errc());
  return std::string(buffer, r.ptr);
}

void Counter::Inc(double delta) {
  CHECK_GE(delta, 0.0) << "a counter never goes down";
  value_ += delta;
}

Histogram::Histogram(std::vector<double> upper_bounds)
    : upper_bounds_(std::move(upper_bounds)), bucket_counts_(upper_bounds_.size() + 1, 0) {
  CHECK(!upper_bounds_.empty());
  for (size_t i = 0; i < upper_bounds_.size(); ++i) {
    CHECK(std::isfinite(upper_bounds_[i]));
    if (i > 0) CHECK_LT(upper_bounds_[i - 1], upper_bounds_[i]);
  }
}

void Histogram::Observe(double value) {
  size_t i = 0;
  while (i < upper_bounds_.size() && value > upper_bounds_[i]) ++i;
  ++bucket_counts_[i];
  ++count_;
  sum_ += value;
}

template <typename T>
T& MetricFamily<T>::Get(const MetricLabels& labels) {
  auto it = series_.find(labels);
  if (it != series_.end()) return *it->second;
  for (const auto& [name, value] : labels) CHECK(IsValidName(name, false) && name != "le") << name;
  std::unique_ptr<T> metric;
  if constexpr (std::is_same_v<T, Histogram>) {
    metric = std::make_unique<Histogram>(upper_bounds_);
  } else {
    metric = std::make_unique<T>();
  }
  return *series_.emplace(labels, std::move(metric)).first->second;
}

template class MetricFamily<Counter>;
template class MetricFamily<Gauge>;
template class MetricFamily<Histogram>;

struct MetricsRegistry::Entry {
  std::variant<std::unique_ptr<MetricFamily<Counter>>, std::unique_ptr<MetricFamily<Gauge>>,
               std::unique_ptr<MetricFamily<Histogram>>>
      family;
};

MetricsRegistry::MetricsRegistry(MetricLabels const_labels) : const_labels_(std::move(const_labels)) {
  for (const auto& [name, value] : const_labels_) CHECK(IsValidName(name, false) && name != "le") << name;
}

MetricsRegistry::~MetricsRegistry() = default;

void MetricsRegistry::CheckNewName(const std::string& name) const {
  CHECK(IsValidName(name, true)) << name;
  for (const auto& entry : entries_) {
    std::visit([&](const auto& family) { CHECK(family->name() != name) << name << " added twice"; }, entry->family);
  }
}

MetricFamily<Counter>& MetricsRegistry::AddCounter(const std::string& name, const std::string& help) {
  CheckNewName(name);
  auto family = std::make_unique<MetricFamily<Counter>>(name, help, MetricType::kCounter, std::vector<double>{});
  MetricFamily<Counter>& ref = *family;
  entries_.push_back(std::make_unique<Entry>(Entry{std::move(family)}));
  return ref;
}

MetricFamily<Gauge>& MetricsRegistry::AddGauge(const std::string& name, const std::string& help) {
  CheckNewName(name);
  auto family = std::make_unique<MetricFamily<Gauge>>(name, help, MetricType::kGauge, std::vector<double>{});
  MetricFamily<Gauge>& ref = *family;
  entries_.push_back(std::make_unique<Entry>(Entry{std::move(family)}));
  return ref;
}

MetricFamily<Histogram>& MetricsRegistry::AddHistogram(const std::string& name, const std::string& help,
                                                       std::vector<double> upper_bounds) {
  CheckNewName(name);
  Histogram check(upper_bounds);  // the bounds' REQUIRES, checked now rather than at the first series
  auto family = std::make_unique<MetricFamily<Histogram>>(name, help, MetricType::kHistogram, std::move(upper_bounds));
  MetricFamily<Histogram>& ref = *family;
  entries_.push_back(std::make_unique<Entry>(Entry{std::move(family)}));
  return ref;
}

std::string MetricsRegistry::Render() const {
  std::string out;
  for (const auto& entry : entries_) {
    std::visit(
        [&](const auto& family) {
          const std::string& name = family->name();
          out += "# HELP " + name + " " + EscapeHelp(family->help()) + "\n";
          out += "# TYPE " + name + " " + TypeName(family->type()) + "\n";
          for (const auto& [labels, metric] : family->series()) {
            using T = std::decay_t<decltype(*metric)>;
            if constexpr (std::is_same_v<T, Histogram>) {
              uint64_t cumulative = 0;
              for (size_t i = 0; i < metric->bucket_counts().size(); ++i) {
                cumulative += metric->bucket_counts()[i];
                const std::string le = i < metric->upper_bounds().size()
                                           ? FormatMetricValue(metric->upper_bounds()[i])
                                           : std::string("+Inf");
                out += name + "_bucket" + LabelText(const_labels_, labels, &le) + " " + std::to_string(cumulative) + "\n";
              }
              const std::string label_text = LabelText(const_labels_, labels, nullptr);
              out += name + "_sum" + label_text + " " + FormatMetricValue(metric->sum()) + "\n";
              out += name + "_count" + label_text + " " + std::to_string(metric->count()) + "\n";
            } else {
              out += name + LabelText(const_labels_, labels, nullptr) + " " + FormatMetricValue(metric->value()) + "\n";
            }
          }
        },
        entry->family);
  }
  return out;
}

}  // namespace tpserve
