#include "worker/worker_core.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/base/logging.h"
#include "common/base/status_macros.h"

namespace psc {
namespace worker {

WorkerCore::WorkerCore(int task_index, std::vector<proto::DeviceInfo> devices,
                       ps_client::ParameterClient* servers, DeviceSetup device_setup,
                       ps_client::ParameterClient* replica, const CollectiveSetup* collective)
    : task_index_(task_index),
      devices_(std::move(devices)),
      servers_(servers),
      device_setup_(std::move(device_setup)),
      replica_(replica),
      collective_(collective) {}

WorkerCore::~WorkerCore() { Stop(); }

void WorkerCore::Stop() {
  std::thread t;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    t = std::move(unit_thread_);
  }
  // A unit blocked on the servers (a sync step waiting for a replica that
  // will not come) ends now instead of at its timeout.
  if (servers_ != nullptr) servers_->CancelAll();
  if (replica_ != nullptr) replica_->CancelAll();
  if (t.joinable()) t.join();
}

absl::Status WorkerCore::EndOrphanedUnit() {
  int64_t unit = -1;
  int polls = kOrphanPolls;
  {
    absl::MutexLock lock(&mu_);
    if (!running_) return absl::OkStatus();
    cancel_unit_ = true;
    unit = current_unit_;
    // A collective unit may wait in an all-reduce, which nothing cancels,
    // for a peer that never got the unit (its chief died between the two
    // RunUnit calls): it ends at the group's timeout, so wait that long.
    if (trainer_ != nullptr && trainer_->collective_timeout() > absl::ZeroDuration()) {
      const absl::Duration wait = trainer_->collective_timeout() + absl::Seconds(15);
      polls = std::max<int>(polls, static_cast<int>(wait / kOrphanPoll));
    }
  }
  // The unit ends at its next step boundary or when the call it waits in is
  // ended; calls it starts after one CancelInFlight are ended by the next.
  bool ended = false;
  for (int i = 0; i < polls && !ended; ++i) {
    if (servers_ != nullptr) servers_->CancelInFlight();
    absl::MutexLock lock(&mu_);
    ended = mu_.AwaitWithTimeout(absl::Condition(
                                     +[](bool* running) { return !*running; }, &running_),
                                 kOrphanPoll);
  }
  std::thread finished;
  {
    absl::MutexLock lock(&mu_);
    cancel_unit_ = false;
    if (!ended) {
      return absl::DeadlineExceededError(
          absl::StrCat("unit ", unit, " of a previous chief did not end within ",
                       absl::FormatDuration(kOrphanPoll * polls), " of being cancelled"));
    }
    finished = std::move(unit_thread_);
  }
  finished.join();  // its answer (to the chief that is gone) has been given
  base::Logf("worker: cancelled unit %d, started by a previous chief", unit);
  return absl::OkStatus();
}

absl::Status WorkerCore::StartJob(const proto::JobSpec& job) {
  const std::string fingerprint = job.SerializeAsString();
  PSC_RETURN_IF_ERROR(EndOrphanedUnit());
  {
    absl::MutexLock lock(&mu_);
    if (running_) {
      return absl::FailedPreconditionError("a unit started while StartJob ran");
    }
    if (trainer_ != nullptr && job_fingerprint_ == fingerprint) {
      return absl::OkStatus();  // the same job again: a no-op
    }
  }
  const bool in_group = job.strategy() == proto::MULTI_WORKER_MIRRORED;
  ps_client::ParameterClient* client = in_group ? replica_ : servers_;
  if (client == nullptr) {
    return absl::FailedPreconditionError(
        in_group ? "a multi_worker_mirrored job, but this worker's cluster has ps tasks (a "
                   "collective cluster has none)"
                 : "a parameter_server job, but this worker's cluster has no ps task");
  }
  if (job.placement().num_shards() != client->num_shards()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the job places variables on ", job.placement().num_shards(),
                     " shards; this worker's cluster has ", client->num_shards()));
  }
  // Building the trainer loads the data (about half a second): fine here,
  // StartJob comes once per job.
  PSC_ASSIGN_OR_RETURN(auto trainer, ReplicaTrainer::Create(job, task_index_, client, device_setup_,
                                                            nullptr, collective_));
  trainer->set_straggler_factor(straggler_factor_);
  absl::MutexLock lock(&mu_);
  trainer_ = std::move(trainer);
  job_fingerprint_ = fingerprint;
  job_id_ = job.job_id();
  steps_done_ = 0;
  return absl::OkStatus();
}

void WorkerCore::RunUnit(const proto::RunUnitRequest& unit, UnitDone done) {
  absl::MutexLock lock(&mu_);
  if (trainer_ == nullptr) {
    done(absl::FailedPreconditionError("no job: call StartJob first"));
    return;
  }
  if (unit.job_id() != job_id_) {
    done(absl::FailedPreconditionError(
        absl::StrCat("unit of job \"", unit.job_id(), "\"; this worker runs \"", job_id_, "\"")));
    return;
  }
  if (running_ || stopping_) {
    done(absl::FailedPreconditionError(stopping_ ? "the worker is stopping"
                                                 : "a unit is already running"));
    return;
  }
  running_ = true;
  current_unit_ = unit.unit();
  unit_steps_ = 0;
  last_error_.clear();
  if (unit_thread_.joinable()) unit_thread_.join();  // the previous unit's finished thread
  ReplicaTrainer* trainer = trainer_.get();
  unit_thread_ = std::thread([this, trainer, unit, done = std::move(done)] {
    auto metrics = trainer->RunUnit(
        unit,
        [this] {
          absl::MutexLock lock(&mu_);
          return stopping_ || cancel_unit_;
        },
        [this](const StepSample& sample) {
          absl::MutexLock lock(&mu_);
          ++unit_steps_;
          ++counters_.steps;
          counters_.examples += sample.examples;
          counters_.compute_seconds += sample.compute_seconds;
          counters_.comm_seconds += sample.comm_seconds;
          counters_.idle_seconds += sample.idle_seconds;
          counters_.last_step = sample;
        });
    {
      absl::MutexLock lock(&mu_);
      running_ = false;
      if (metrics.ok()) {
        steps_done_ += unit.num_steps();
        ++counters_.units_done;
      } else {
        last_error_ = std::string(metrics.status().message());
        ++counters_.units_failed;
      }
    }
    done(std::move(metrics));
  });
}

proto::WorkerStatus WorkerCore::Status(bool stopping) const {
  proto::WorkerStatus s;
  s.set_task_index(task_index_);
  {
    absl::MutexLock lock(&mu_);
    s.set_state(stopping || stopping_ ? proto::WorkerStatus::STOPPING
                : running_            ? proto::WorkerStatus::RUNNING
                : trainer_ != nullptr ? proto::WorkerStatus::READY
                                      : proto::WorkerStatus::IDLE);
    s.set_job_id(job_id_);
    s.set_current_unit(current_unit_);
    s.set_steps_done(steps_done_);
  }
  for (const proto::DeviceInfo& d : devices_) *s.add_devices() = d;
  return s;
}

WorkerCore::Counters WorkerCore::counters() const {
  absl::MutexLock lock(&mu_);
  Counters c = counters_;
  c.running = running_;
  return c;
}

WorkerCore::Progress WorkerCore::CurrentProgress() const {
  absl::MutexLock lock(&mu_);
  return Progress{running_, current_unit_, unit_steps_, last_error_};
}

}  // namespace worker
}  // namespace psc
