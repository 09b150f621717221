// The chief's job (DESIGN.md, "Roles and data flow"): place the variables,
// configure the shards, initialize them from the seed or restore the latest
// checkpoint, hand the job to the workers, dispatch units of steps,
// evaluate after every epoch and at the end, checkpoint, and collect the
// result. Transport-free: servers are a ParameterClient, workers a
// WorkerClient, so tests run whole clusters in one process.
//
// Dispatch: every unit covers the same steps on every live worker, the i-th
// live worker filling replica slot i of R = live workers; a unit never
// crosses an epoch end or a checkpoint step, so those happen with every
// worker idle (a consistent checkpoint in every mode).
//
// Failures:
//  - a worker dies: the chief notices when its unit fails and the worker no
//    longer answers; it lowers replicas_to_aggregate (sync) and the live
//    set (ssp) on every shard at once, so the survivors' current step
//    completes without it, and later units split the batch over the
//    survivors. workers_lost counts it. In async and ssp its unit is then
//    run by a survivor pushing as the lost worker (push_as_worker), so each
//    step of its slot is applied exactly once; sync steps are already closed.
//  - a server dies: units fail while their workers still answer. The chief
//    waits (up to server_recovery_timeout) for every shard to answer again
//    (the launcher's --restart_failed or an orchestrator restarts it),
//    configures them, restores every shard from the latest checkpoint, and
//    redoes the work since. recoveries counts it. Without a checkpoint the
//    job fails with a message that says so.
#ifndef PSC_CHIEF_JOB_RUNNER_H_
#define PSC_CHIEF_JOB_RUNNER_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/job/job_result.h"
#include "common/job/progress.h"
#include "common/ps_client/parameter_client.h"
#include "proto/job.pb.h"
#include "proto/worker.pb.h"

namespace psc {
namespace chief {

// Thread-safe implementations.
class WorkerClient {
 public:
  virtual ~WorkerClient() = default;
  virtual int num_workers() const = 0;
  virtual absl::Status StartJob(int worker, const proto::JobSpec& job) = 0;
  // Blocks until the unit is done.
  virtual absl::StatusOr<proto::UnitMetrics> RunUnit(int worker,
                                                     const proto::RunUnitRequest& unit) = 0;
  // Whether the worker process still answers (after a failed unit: a live
  // worker failed because of the servers; a dead one is lost).
  virtual bool Alive(int worker) = 0;
};

struct JobRunnerOptions {
  proto::JobSpec job;                  // validated (JobSpecFromFlags)
  std::string checkpoint_dir;          // "" = no checkpoints
  int64_t checkpoint_every_steps = 0;  // 0 = only at the end
  int64_t unit_steps = 50;             // steps per unit at most
  int eval_threads = 0;                // CPU threads of the chief's evaluation
  std::string logdir;                  // TensorBoard event files; "" = none
  absl::Duration server_recovery_timeout = absl::Minutes(5);
  job::ProgressPrinter* progress = nullptr;  // not owned; may be null
  // Called after each unit (and its checkpoint) with the global step
  // reached; returning true stops the job there with CANCELLED, as if the
  // chief died (tests use it). May be null.
  std::function<bool(int64_t)> stop_after_unit;
};

// Runs the job to its end and returns the result file's content.
absl::StatusOr<job::JobResult> RunJob(const JobRunnerOptions& options,
                                      ps_client::ParameterClient* servers, WorkerClient* workers);

}  // namespace chief
}  // namespace psc

#endif  // PSC_CHIEF_JOB_RUNNER_H_
