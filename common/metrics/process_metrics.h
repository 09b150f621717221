// The process_* metrics Prometheus client libraries export (CPU seconds,
// resident and virtual memory, start time, open and maximum file
// descriptors, threads), read from /proc/self, and a build_info gauge.
#ifndef PSC_COMMON_METRICS_PROCESS_METRICS_H_
#define PSC_COMMON_METRICS_PROCESS_METRICS_H_

#include <string>
#include <vector>

#include "prometheus/metric_family.h"

namespace psc {
namespace metrics {

// Empty where /proc cannot be read (never an error: a scrape still works).
std::vector<prometheus::MetricFamily> ProcessFamilies();

// pscluster_build_info{version, git_commit, role} 1.
prometheus::MetricFamily BuildInfoFamily(const std::string& role);

}  // namespace metrics
}  // namespace psc

#endif  // PSC_COMMON_METRICS_PROCESS_METRICS_H_
