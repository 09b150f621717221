// The chief's role in a process: its flags, the checks of its job, and the
// run itself (find the cluster, reach the servers and workers, RunJob).
// The chief daemon runs it; so does worker 0 of a multi_worker_mirrored
// cluster that has no chief task (as TensorFlow's worker 0 does), serving
// the Coordinator service on its own port.
#ifndef PSC_CHIEF_CHIEF_ROLE_H_
#define PSC_CHIEF_CHIEF_ROLE_H_

#include <functional>

#include "absl/flags/declare.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "chief/job_gauges.h"
#include "chief/job_runner.h"
#include "chief/task_registry.h"
#include "common/collective/collective.h"
#include "common/daemon/daemon.h"
#include "common/job/job_result.h"
#include "proto/job.pb.h"

ABSL_DECLARE_FLAG(absl::Duration, startup_timeout);
ABSL_DECLARE_FLAG(std::string, checkpoint_dir);
ABSL_DECLARE_FLAG(int64_t, checkpoint_every_steps);
ABSL_DECLARE_FLAG(int64_t, unit_steps);
ABSL_DECLARE_FLAG(int64_t, eval_every_steps);
ABSL_DECLARE_FLAG(int32_t, eval_threads);
ABSL_DECLARE_FLAG(std::string, logdir);
ABSL_DECLARE_FLAG(absl::Duration, heartbeat_timeout);
ABSL_DECLARE_FLAG(absl::Duration, evaluator_wait);
ABSL_DECLARE_FLAG(int32_t, max_workers);

namespace psc {
namespace chief {

// The job flags and the chief's own, validated (INVALID_ARGUMENT naming the
// flag). A chief of a mirrored job is refused: that strategy has no chief.
absl::StatusOr<proto::JobSpec> ChiefJobFromFlags();

// The most seats --max_workers may ask for.
inline constexpr int kMaxWorkerSeats = 4096;

// --max_workers against the cluster: not fewer than TF_CONFIG's workers.
absl::Status CheckMaxWorkers(const cluster::ClusterConfig& cluster);

// The registry's options from the chief's flags (--max_workers,
// --heartbeat_timeout).
TaskRegistryOptions RegistryOptionsFromFlags();

// What the cluster of `strategy` must look like (ps tasks or none).
cluster::ClusterConfig::Layout LayoutFor(proto::Strategy strategy);

// Waits for the cluster (cancelled when `interrupted` returns true),
// prints its table, and runs `job` on it with the chief's flags;
// `interrupted` also stops the job after the current unit. `registry` is
// what the Coordinator service feeds (heartbeats); `group_store` the store
// it serves (multi_worker_mirrored's groups); `gauges` (may be null) what
// the chief's metrics read.
absl::StatusOr<job::JobResult> RunChiefJob(const daemon::DaemonContext& context,
                                           const proto::JobSpec& job, TaskRegistry* registry,
                                           collective::KeyValueStore* group_store,
                                           const std::function<bool()>& interrupted,
                                           JobGauges* gauges = nullptr);

// After a job: prints the final line, writes --metrics_out, waits for the
// evaluator's final evaluation (--evaluator_wait; when `registry` is given
// and there are checkpoints), and shuts the cluster down. The exit code.
int FinishChiefJob(const char* program, const daemon::DaemonContext& context,
                   absl::StatusOr<job::JobResult> outcome, const TaskRegistry* registry = nullptr);

}  // namespace chief
}  // namespace psc

#endif  // PSC_CHIEF_CHIEF_ROLE_H_
