// The shard's counters as Prometheus metrics on --metrics_port, read from
// ShardServer::Stats() at each scrape (prometheus-cpp pull exposer).
#ifndef PSC_PS_SERVER_METRICS_EXPORTER_H_
#define PSC_PS_SERVER_METRICS_EXPORTER_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "prometheus/client_metric.h"
#include "prometheus/collectable.h"
#include "prometheus/exposer.h"
#include "prometheus/metric_family.h"
#include "prometheus/metric_type.h"
#include "proto/parameter_server.pb.h"

namespace psc {
namespace ps_server {

// The metric families for one stats snapshot (pscluster_ps_* names).
std::vector<prometheus::MetricFamily> ShardMetricFamilies(const proto::ShardStats& stats);

// Serves GET /metrics on `address` ("host:port"; port 0 picks one).
// Thread-safe.
class MetricsExporter {
 public:
  using StatsSource = std::function<proto::ShardStats()>;

  // Serves what `stats` answers at each scrape (thread-safe; it must outlive
  // the exporter). INVALID_ARGUMENT/UNAVAILABLE when the address cannot be
  // served.
  static absl::StatusOr<std::unique_ptr<MetricsExporter>> Start(const std::string& address,
                                                                StatsSource stats);
  int port() const;

 private:
  class Collector;
  MetricsExporter() = default;
  std::shared_ptr<Collector> collector_;
  std::unique_ptr<prometheus::Exposer> exposer_;
};

}  // namespace ps_server
}  // namespace psc

#endif  // PSC_PS_SERVER_METRICS_EXPORTER_H_
