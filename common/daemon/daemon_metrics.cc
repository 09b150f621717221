#include "common/daemon/daemon_metrics.h"

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "common/base/logging.h"
#include "common/cluster/host_port.h"
#include "common/daemon/daemon_flags.h"

namespace psc {
namespace daemon {

absl::StatusOr<std::unique_ptr<metrics::Exporter>> StartMetricsFromFlags(
    const std::string& program, const std::string& host, const std::string& role,
    metrics::Exporter::Source source) {
  const int port = absl::GetFlag(FLAGS_metrics_port);
  if (port < 0 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("--metrics_port=", port, ": must be in [0, 65535]"));
  }
  if (port == 0) return nullptr;
  const cluster::HostPort at{host, port};
  auto exporter = metrics::Exporter::Start(host, port, role, std::move(source));
  if (!exporter.ok()) {
    return absl::UnavailableError(absl::StrCat("--metrics_port=", port, ": cannot listen on ",
                                               at.ToString(), ": ", exporter.status().message()));
  }
  base::Logf("%s: Prometheus metrics on http://%s/metrics", program, at.ToString());
  return exporter;
}

}  // namespace daemon
}  // namespace psc
