#include "common/metrics/families.h"

#include <algorithm>
#include <limits>

namespace psc {
namespace metrics {
namespace {

prometheus::MetricFamily Single(const std::string& name, const std::string& help,
                                prometheus::MetricType type, double value, const Labels& labels) {
  prometheus::MetricFamily f;
  f.name = name;
  f.help = help;
  f.type = type;
  prometheus::ClientMetric m;
  for (const auto& [key, v] : labels) m.label.push_back({key, v});
  if (type == prometheus::MetricType::Counter) {
    m.counter.value = value;
  } else {
    m.gauge.value = value;
  }
  f.metric.push_back(std::move(m));
  return f;
}

}  // namespace

prometheus::MetricFamily Gauge(const std::string& name, const std::string& help, double value,
                               const Labels& labels) {
  return Single(name, help, prometheus::MetricType::Gauge, value, labels);
}

prometheus::MetricFamily Counter(const std::string& name, const std::string& help, double value,
                                 const Labels& labels) {
  return Single(name, help, prometheus::MetricType::Counter, value, labels);
}

prometheus::MetricFamily Histogram(const std::string& name, const std::string& help,
                                   const std::vector<double>& bounds,
                                   const std::vector<uint64_t>& counts, double sum,
                                   const Labels& labels) {
  prometheus::MetricFamily f;
  f.name = name;
  f.help = help;
  f.type = prometheus::MetricType::Histogram;
  prometheus::ClientMetric m;
  for (const auto& [key, v] : labels) m.label.push_back({key, v});
  uint64_t cumulative = 0;
  for (size_t i = 0; i <= bounds.size(); ++i) {
    cumulative += i < counts.size() ? counts[i] : 0;
    prometheus::ClientMetric::Bucket b;
    b.cumulative_count = cumulative;
    b.upper_bound = i < bounds.size() ? bounds[i] : std::numeric_limits<double>::infinity();
    m.histogram.bucket.push_back(b);
  }
  m.histogram.sample_count = cumulative;
  m.histogram.sample_sum = sum;
  f.metric.push_back(std::move(m));
  return f;
}

std::vector<uint64_t> Rebucket(const std::vector<int64_t>& linear,
                               const std::vector<double>& bounds) {
  std::vector<uint64_t> out(bounds.size() + 1, 0);
  for (size_t value = 0; value < linear.size(); ++value) {
    if (linear[value] <= 0) continue;
    const bool open_ended = value + 1 == linear.size();
    size_t b =
        std::lower_bound(bounds.begin(), bounds.end(), static_cast<double>(value)) - bounds.begin();
    // The open-ended entry stands for any value from `value` up: only +Inf
    // surely holds them all.
    if (open_ended) b = bounds.size();
    out[b] += static_cast<uint64_t>(linear[value]);
  }
  return out;
}

std::vector<double> ExponentialBounds(int n) {
  std::vector<double> out;
  if (n <= 0) return out;
  out.push_back(0);
  double bound = 1;
  for (int i = 1; i < n; ++i, bound *= 2) out.push_back(bound);
  return out;
}

}  // namespace metrics
}  // namespace psc
