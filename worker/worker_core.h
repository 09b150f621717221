// A worker's job lifecycle, transport-free: the WorkerService (gRPC) and the
// in-process tests drive it the same way.
//
//   IDLE --StartJob--> READY --RunUnit--> RUNNING --unit ends--> READY
//   any --Stop--> STOPPED (a running unit is cancelled, new ones refused)
//
// StartJob builds the ReplicaTrainer for the job (data, model, replicas);
// the same job again is a no-op, so a restarted chief's StartJob costs
// nothing, and it first cancels a unit a previous chief left running. RunUnit runs the unit on a
// thread of its own, never the caller's, one unit at a time.
#ifndef PSC_WORKER_WORKER_CORE_H_
#define PSC_WORKER_WORKER_CORE_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/ps_client/parameter_client.h"
#include "proto/job.pb.h"
#include "proto/worker.pb.h"
#include "worker/device_plan.h"
#include "worker/replica_trainer.h"

namespace psc {
namespace worker {

// Thread-safe.
class WorkerCore {
 public:
  using UnitDone = std::function<void(absl::StatusOr<proto::UnitMetrics>)>;

  // `servers` is not owned and must outlive the core (null: the cluster has
  // no ps). Jobs train on `device_setup` (by default the CPU alone);
  // `devices` are what StartJob and GetStatus report. `replica` (may be
  // null) is the worker's embedded replica and `collective` how it reaches
  // its group: what a multi_worker_mirrored job trains with (both not
  // owned).
  WorkerCore(int task_index, std::vector<proto::DeviceInfo> devices,
             ps_client::ParameterClient* servers, DeviceSetup device_setup = DeviceSetup(),
             ps_client::ParameterClient* replica = nullptr,
             const CollectiveSetup* collective = nullptr);
  ~WorkerCore();  // Stop()

  // ReplicaTrainer::set_straggler_factor for every job started after this
  // (worker --straggler_factor). Call before the first StartJob.
  void set_straggler_factor(double factor) { straggler_factor_ = factor; }

  // A unit still running belongs to a chief that is gone (a chief calls
  // StartJob once, at its start, and a restarted one does so before it
  // restores the servers): it is cancelled and waited for first
  // (DEADLINE_EXCEEDED if it does not end within 30 s, or, for a
  // multi_worker_mirrored unit that may wait in an all-reduce nothing can
  // cancel, within the job's collective timeout + 15 s). INVALID_ARGUMENT for a job
  // placed on another number of shards than this worker's cluster has, and
  // FAILED_PRECONDITION for a strategy this worker's cluster cannot run
  // (multi_worker_mirrored with ps tasks, parameter_server without); the
  // trainer's errors (data, model, devices).
  absl::Status StartJob(const proto::JobSpec& job) ABSL_LOCKS_EXCLUDED(mu_);

  // Starts `unit`; `done` runs once with its metrics or error, on the unit's
  // thread (or at once, on the caller's, with FAILED_PRECONDITION: no job
  // yet, a unit of another job, a unit already running, or stopped).
  void RunUnit(const proto::RunUnitRequest& unit, UnitDone done) ABSL_LOCKS_EXCLUDED(mu_);

  // The state GetStatus reports (`stopping`: the daemon is shutting down).
  proto::WorkerStatus Status(bool stopping) const ABSL_LOCKS_EXCLUDED(mu_);

  // What the heartbeats report: the unit running (or the last one), the
  // steps of it done so far, and the error it ended with ("" if none).
  struct Progress {
    bool running = false;
    int64_t unit = -1;
    int64_t steps_done = 0;
    std::string error;
  };
  Progress CurrentProgress() const ABSL_LOCKS_EXCLUDED(mu_);

  // What the worker's metrics report (worker_metrics.h): totals since the
  // daemon started, over every job, and the last step's figures.
  struct Counters {
    int64_t steps = 0;
    int64_t examples = 0;
    double compute_seconds = 0;
    double comm_seconds = 0;
    double idle_seconds = 0;
    int64_t units_done = 0;
    int64_t units_failed = 0;
    StepSample last_step;  // seconds == 0: none yet
    bool running = false;
  };
  Counters counters() const ABSL_LOCKS_EXCLUDED(mu_);

  // Cancels a running unit (its pulls and pushes end at once: the servers'
  // client is cancelled) and waits for its thread. Idempotent.
  void Stop() ABSL_LOCKS_EXCLUDED(mu_);

  const std::vector<proto::DeviceInfo>& devices() const { return devices_; }

  // Cancels a running unit and waits (bounded, as StartJob) until it has
  // ended: its chief is gone (StartJob; a joined worker that a restarted
  // chief does not know, before it joins again, worker/heartbeat.h).
  absl::Status EndOrphanedUnit() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  static constexpr absl::Duration kOrphanPoll = absl::Milliseconds(50);
  static constexpr int kOrphanPolls = 600;  // 30 s

  // Constant after construction.
  const int task_index_;
  const std::vector<proto::DeviceInfo> devices_;
  ps_client::ParameterClient* const servers_;
  const DeviceSetup device_setup_;
  ps_client::ParameterClient* const replica_;
  const CollectiveSetup* const collective_;

  mutable absl::Mutex mu_;
  std::unique_ptr<ReplicaTrainer> trainer_ ABSL_GUARDED_BY(mu_);
  double straggler_factor_ = 1.0;                     // set before the first job
  std::string job_fingerprint_ ABSL_GUARDED_BY(mu_);  // serialized JobSpec
  std::string job_id_ ABSL_GUARDED_BY(mu_);
  bool running_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool cancel_unit_ ABSL_GUARDED_BY(mu_) = false;  // EndOrphanedUnit
  int64_t current_unit_ ABSL_GUARDED_BY(mu_) = -1;
  int64_t steps_done_ ABSL_GUARDED_BY(mu_) = 0;  // over the job's finished units
  int64_t unit_steps_ ABSL_GUARDED_BY(mu_) = 0;  // of the current unit so far
  std::string last_error_ ABSL_GUARDED_BY(mu_);
  Counters counters_ ABSL_GUARDED_BY(mu_);
  std::thread unit_thread_ ABSL_GUARDED_BY(mu_);
};

}  // namespace worker
}  // namespace psc

#endif  // PSC_WORKER_WORKER_CORE_H_
