// The plan of a local cluster: which tasks, on which loopback ports, with
// which TF_CONFIG. Transport-free and deterministic given the ports.
#ifndef PSC_LAUNCHER_LAUNCH_PLAN_H_
#define PSC_LAUNCHER_LAUNCH_PLAN_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/cluster/cluster_config.h"

namespace psc {
namespace launcher {

struct PlannedTask {
  cluster::TaskType type;
  int index;
  std::string address;    // "127.0.0.1:port"
  std::string binary;     // "ps_server", "worker", "evaluator" or "chief"
  std::string tf_config;  // this task's TF_CONFIG
  int metrics_port = 0;   // its --metrics_port (launch --metrics); 0 = none
  std::string Name() const;
};

struct LaunchOptions {
  int num_ps = 1;
  int num_workers = 2;
  bool evaluator = false;  // plan the optional "evaluator" task (binary "evaluator")
  // multi_worker_mirrored: no ps task (num_ps must be 0).
  bool collective = false;
};

// Tasks in start order: every ps, every worker, the evaluator if asked for,
// then the chief, on the ports `pick_ports(n)` returns (n distinct ports).
// Every task's TF_CONFIG lists the whole cluster, the evaluator included.
// INVALID_ARGUMENT for fewer than one ps (any ps when `collective`) or
// worker, or more than 64 of either; INTERNAL if ports repeat.
absl::StatusOr<std::vector<PlannedTask>> PlanLocalCluster(
    const LaunchOptions& options,
    const std::function<absl::StatusOr<std::vector<int>>(int)>& pick_ports);

// The --intra_op_threads each of `workers` worker tasks gets by default
// when they share one host of `cores` cores: cores / workers, at least 1.
// Giving every worker all the cores oversubscribes them (2 workers on 2
// cores ran 7x slower), and the threads a worker uses can change its
// floating-point sums (docs/guide/training.md, "Threads and reproducibility").
int SharedIntraOpThreads(int cores, int workers);

}  // namespace launcher
}  // namespace psc

#endif  // PSC_LAUNCHER_LAUNCH_PLAN_H_
