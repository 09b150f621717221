// The chief's job (DESIGN.md, "Roles and data flow"): place the variables,
// configure the shards, initialize them from the seed or restore the latest
// checkpoint, hand the job to the workers, dispatch units of steps,
// evaluate after every epoch (and every eval_every_steps) and at the end,
// checkpoint, and collect the result. Transport-free: servers are a ParameterClient, workers a
// WorkerClient, so tests run whole clusters in one process.
//
// The parts, one file each: units and their dispatch (unit_dispatcher.h),
// who takes part and when a worker is lost (membership.h), what is done
// after a failure (recovery.h), the calls to all shards (shard_control.h),
// and what the job reports (job_report.h).
//
// multi_worker_mirrored (DESIGN.md, "Strategies"): the servers are the
// workers' own replicas (replica_group_client.h) and each unit names the
// collective group its slots all-reduce in. A unit that fails while its
// workers answer (a peer died: the survivors' all-reduce failed) is not a
// server failure: the chief compares the live replicas' steps, hands the
// state of the furthest to any that is one step behind (a member that did
// not complete the step's all-reduce), and goes on from that step with a
// new group, without a checkpoint restore. At every unit boundary a lost
// worker that answers again (restarted) is given the job and a peer's
// state, and joins the next group. A unit never crosses an epoch
// end or a checkpoint step, so those happen with every worker idle (a
// consistent checkpoint in every mode).
#ifndef PSC_CHIEF_JOB_RUNNER_H_
#define PSC_CHIEF_JOB_RUNNER_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "chief/job_gauges.h"
#include "chief/replica_group_client.h"
#include "chief/task_registry.h"
#include "chief/worker_client.h"
#include "common/base/clock.h"
#include "common/collective/collective.h"
#include "common/job/job_export.h"
#include "common/job/job_result.h"
#include "common/job/progress.h"
#include "common/ps_client/parameter_client.h"
#include "proto/job.pb.h"

namespace psc {
namespace chief {

struct JobRunnerOptions {
  proto::JobSpec job;                  // validated (JobSpecFromFlags)
  std::string checkpoint_dir;          // "" = no checkpoints
  int64_t checkpoint_every_steps = 0;  // 0 = only at the end
  int64_t unit_steps = 50;             // steps per unit at most
  // Validation every N global steps as well as at every epoch end (units
  // end there); 0 = only at epoch ends.
  int64_t eval_every_steps = 0;
  int eval_threads = 0;  // CPU threads of the chief's evaluation
  std::string logdir;    // TensorBoard event files; "" = none
  absl::Duration server_recovery_timeout = absl::Minutes(5);
  job::ProgressPrinter* progress = nullptr;  // not owned; may be null
  JobGauges* gauges = nullptr;               // the chief's metrics (not owned; may be null)
  // The workers' heartbeats, joins and leaves (fed by the Coordinator
  // service); null: a worker is lost only when its unit fails and it does
  // not answer, and nobody joins or leaves.
  TaskRegistry* registry = nullptr;
  // The workers that take part from the start (TF_CONFIG's); the
  // WorkerClient's seats beyond them are for workers that join
  // (registry->Join). 0: every seat. The batch contract's R (slots per
  // step) is this count.
  int initial_workers = 0;
  // A registered worker not heard from for this long is lost; zero: off.
  absl::Duration heartbeat_timeout = absl::ZeroDuration();
  // How often heartbeats are checked while a unit runs.
  absl::Duration heartbeat_poll = absl::Seconds(1);
  base::Clock* clock = nullptr;  // null: the system clock
  // Called after each unit (async and ssp: each stretch of the work queue)
  // and its checkpoint, with the global step reached; returning true stops
  // the job there with CANCELLED, as if the chief died (tests use it). May
  // be null.
  std::function<bool(int64_t)> stop_after_unit;
  // A signal asked the chief to stop (SIGTERM, SIGINT): polled while the
  // async and ssp work queue runs, which then hands out no unit more and
  // stops the job with CANCELLED once the running ones end (a stretch may
  // be an epoch long). May be null.
  std::function<bool()> interrupted;
  // The trained model written at the end, to Keras files (job_export.h).
  job::ExportOptions exports;
  // multi_worker_mirrored: the workers' replicas, which must also be the
  // `servers` RunJob is given (not owned).
  ReplicaGroupClient* replica_group = nullptr;
  // multi_worker_mirrored: the groups' rendezvous store (not owned; may be
  // null): a unit's group is abandoned there (its abort key) as soon as one
  // of its workers is lost, so the others stop waiting for it.
  collective::KeyValueStore* group_store = nullptr;
  // multi_worker_mirrored: after this many regroups in a row without a
  // unit completing, the job fails with the last failure.
  int max_regroups = 10;
  // multi_worker_mirrored: how often a lost worker is asked whether it is
  // back (at unit boundaries; a hung one costs the call's deadline).
  absl::Duration join_poll = absl::Seconds(5);
};

// Runs the job to its end and returns the result file's content.
absl::StatusOr<job::JobResult> RunJob(const JobRunnerOptions& options,
                                      ps_client::ParameterClient* servers, WorkerClient* workers);

}  // namespace chief
}  // namespace psc

#endif  // PSC_CHIEF_JOB_RUNNER_H_
