#include "chief/job_gauges.h"

#include "common/metrics/families.h"

namespace psc {
namespace chief {

void JobGauges::Update(const std::function<void(Snapshot*)>& change) {
  absl::MutexLock lock(&mu_);
  change(&snapshot_);
}

JobGauges::Snapshot JobGauges::Get() const {
  absl::MutexLock lock(&mu_);
  return snapshot_;
}

std::vector<prometheus::MetricFamily> ChiefMetricFamilies(const JobGauges::Snapshot& s) {
  using metrics::Counter;
  using metrics::Gauge;
  std::vector<prometheus::MetricFamily> out = {
      Gauge("pscluster_chief_step", "The global step the job has reached.", s.step),
      Gauge("pscluster_chief_total_steps", "The job's steps, all epochs.", s.total_steps),
      Gauge("pscluster_chief_epoch", "The epoch running (1-based), or the last one.", s.epoch),
      Gauge("pscluster_chief_epochs", "The job's epochs.", s.epochs),
      Gauge("pscluster_chief_loss", "Training loss of the running epoch so far.", s.loss),
      Gauge("pscluster_chief_accuracy", "Training accuracy of the running epoch so far.",
            s.accuracy),
      Gauge("pscluster_chief_examples_per_second",
            "Examples per second over the running epoch's wall time.", s.examples_per_second),
      Gauge("pscluster_chief_workers", "Worker tasks in the chief's TF_CONFIG (the job's R).",
            s.workers),
      Gauge("pscluster_chief_workers_live", "Workers taking part in the job now.", s.workers_live),
      Counter("pscluster_chief_workers_lost_total", "Times a worker was declared lost.",
              s.workers_lost),
      Counter("pscluster_chief_workers_rejoined_total",
              "Times a lost worker took part in the job again.", s.workers_rejoined),
      Counter("pscluster_chief_workers_joined_total",
              "New workers (beyond TF_CONFIG's) that joined the job.", s.workers_joined_new),
      Counter("pscluster_chief_workers_drained_total",
              "Workers that left the job drained (asked to; not lost).", s.workers_drained),
      Counter("pscluster_chief_recoveries_total",
              "Times the servers were restored from a checkpoint.", s.recoveries),
      Counter("pscluster_chief_checkpoints_total", "Checkpoints written.", s.checkpoints),
      Gauge("pscluster_chief_job_finished", "1 once the job has ended.", s.finished ? 1 : 0),
  };
  if (s.evaluated) {  // no validation yet: no value rather than a false 0
    out.push_back(
        Gauge("pscluster_chief_val_loss", "Loss of the last validation point.", s.val_loss));
    out.push_back(Gauge("pscluster_chief_val_accuracy", "Accuracy of the last validation point.",
                        s.val_accuracy));
  }
  return out;
}

}  // namespace chief
}  // namespace psc
