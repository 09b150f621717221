// The shard's counters as Prometheus families (pscluster_ps_*), read from
// ShardServer::Stats() at each scrape of --metrics_port
// (common/daemon/daemon_metrics.h serves them).
#ifndef PSC_PS_SERVER_SHARD_METRICS_H_
#define PSC_PS_SERVER_SHARD_METRICS_H_

#include <vector>

#include "prometheus/metric_family.h"
#include "proto/parameter_server.pb.h"

namespace psc {
namespace ps_server {

// The staleness histogram's bounds: 0, 1, 2, 4, ..., 32, then +Inf.
inline constexpr int kStalenessBounds = 7;

// The metric families of one stats snapshot, each labelled shard="<index>".
std::vector<prometheus::MetricFamily> ShardMetricFamilies(const proto::ShardStats& stats);

}  // namespace ps_server
}  // namespace psc

#endif  // PSC_PS_SERVER_SHARD_METRICS_H_
