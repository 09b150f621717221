// The worker's Prometheus families (pscluster_worker_*), labelled
// task="worker:<index>", from WorkerCore's counters and its servers'
// client: steps, examples, compute and communication seconds, the last
// step's time and examples/s, pushes, pulls, retries, units.
#ifndef PSC_WORKER_WORKER_METRICS_H_
#define PSC_WORKER_WORKER_METRICS_H_

#include <vector>

#include "common/ps_client/parameter_server_client.h"
#include "prometheus/metric_family.h"
#include "worker/worker_core.h"

namespace psc {
namespace worker {

std::vector<prometheus::MetricFamily> WorkerMetricFamilies(
    int task_index, const WorkerCore::Counters& core,
    const ps_client::ParameterServerClient::CallCounts& calls);

}  // namespace worker
}  // namespace psc

#endif  // PSC_WORKER_WORKER_METRICS_H_
