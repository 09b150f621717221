// Building Prometheus metric families by hand: every role exports what it
// reads from its own counters at each scrape (a pull collector), so the
// families are made fresh from a snapshot rather than kept as live
// prometheus-cpp metrics.
#ifndef PSC_COMMON_METRICS_FAMILIES_H_
#define PSC_COMMON_METRICS_FAMILIES_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "prometheus/metric_family.h"

namespace psc {
namespace metrics {

using Labels = std::vector<std::pair<std::string, std::string>>;

prometheus::MetricFamily Gauge(const std::string& name, const std::string& help, double value,
                               const Labels& labels = {});
prometheus::MetricFamily Counter(const std::string& name, const std::string& help, double value,
                                 const Labels& labels = {});

// A histogram from per-bucket (not cumulative) counts: counts[i] for the
// observations in (bounds[i-1], bounds[i]], and one more count, last, for
// those above bounds.back() (+Inf). `counts` must be bounds.size() + 1 long.
prometheus::MetricFamily Histogram(const std::string& name, const std::string& help,
                                   const std::vector<double>& bounds,
                                   const std::vector<uint64_t>& counts, double sum,
                                   const Labels& labels = {});

// Re-buckets a histogram of small integers (linear[i] counts the value i;
// the last entry counts every value from linear.size() - 1 up) into
// `bounds`: the per-bucket counts Histogram takes. A value above
// bounds.back(), and the open-ended last entry, go to +Inf.
std::vector<uint64_t> Rebucket(const std::vector<int64_t>& linear,
                               const std::vector<double>& bounds);

// The exponential bounds 0, 1, 2, 4, ..., 2^(n-2): n bounds.
std::vector<double> ExponentialBounds(int n);

}  // namespace metrics
}  // namespace psc

#endif  // PSC_COMMON_METRICS_FAMILIES_H_
