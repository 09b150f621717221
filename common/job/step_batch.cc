#include "common/job/step_batch.h"

#include "absl/strings/str_cat.h"

namespace psc {
namespace job {

int32_t ReplicasToAggregate(const proto::JobSpec& job) {
  const int32_t r = job.policy().replicas_to_aggregate();
  return r > 0 ? r : job.num_replicas();
}

bool HasBackupWorkers(const proto::JobSpec& job) {
  const bool ps_strategy =
      job.strategy() == proto::STRATEGY_UNSPECIFIED || job.strategy() == proto::PARAMETER_SERVER;
  const int32_t r = job.policy().replicas_to_aggregate();
  return ps_strategy && job.policy().mode() == proto::MODE_SYNC && r > 0 && r < job.num_replicas();
}

int64_t ExamplesReadPerStep(const proto::JobSpec& job) {
  if (!HasBackupWorkers(job)) return job.batch_size();
  return job.batch_size() / job.policy().replicas_to_aggregate() * job.num_replicas();
}

absl::Status ValidateStepBatch(const proto::JobSpec& job, int workers) {
  const int32_t r = job.policy().replicas_to_aggregate();
  if (r < 0 || r > workers) {
    return absl::InvalidArgumentError(
        absl::StrCat("--replicas_to_aggregate=", r, ": must be in [0, ", workers,
                     "] (the cluster's workers; 0 = all of them, fewer makes the others backups)"));
  }
  if (r > 0 && r < workers && job.policy().mode() == proto::MODE_SYNC) {
    if (job.policy().has_loss_scale()) {
      // Each server takes the first R gradients it gets: two could take
      // different ones, and skip a step for an overflow differently.
      return absl::InvalidArgumentError(absl::StrCat(
          "--replicas_to_aggregate=", r, " of ", workers,
          " workers (backup workers) with loss scaling (--loss_scale, or a float16 model's "
          "default): each server would choose its own ",
          r,
          " gradients of a step, and could skip an overflowed step where another applies it; "
          "pass --replicas_to_aggregate=0"));
    }
    if (job.batch_size() % r != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--batch_size=", job.batch_size(), " does not split into --replicas_to_aggregate=", r,
          " slices (with backup workers each worker reads batch_size / R examples)"));
    }
    return absl::OkStatus();
  }
  if (job.batch_size() % workers != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--batch_size=", job.batch_size(), " does not split evenly over ", workers, " workers"));
  }
  return absl::OkStatus();
}

}  // namespace job
}  // namespace psc
