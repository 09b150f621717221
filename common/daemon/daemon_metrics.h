// --metrics_port for every daemon: the role's Prometheus families, with the
// process_* metrics and build_info (common/metrics/exporter.h), on the
// daemon's listen host.
#ifndef PSC_COMMON_DAEMON_DAEMON_METRICS_H_
#define PSC_COMMON_DAEMON_DAEMON_METRICS_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/metrics/exporter.h"

namespace psc {
namespace daemon {

// Null when --metrics_port is 0. INVALID_ARGUMENT for a port out of
// [0, 65535]; UNAVAILABLE, naming the flag and the errno, when the port
// cannot be listened on. Logs the URL it serves.
absl::StatusOr<std::unique_ptr<metrics::Exporter>> StartMetricsFromFlags(
    const std::string& program, const std::string& host, const std::string& role,
    metrics::Exporter::Source source);

}  // namespace daemon
}  // namespace psc

#endif  // PSC_COMMON_DAEMON_DAEMON_METRICS_H_
