// `worker --standalone`: the reference job in one process, with no servers:
// the same model, input pipeline, optimizer code and result file as the
// cluster, and the baseline cluster training is checked against.
#ifndef PSC_WORKER_STANDALONE_TRAINER_H_
#define PSC_WORKER_STANDALONE_TRAINER_H_

#include <vector>

#include "absl/status/statusor.h"
#include "common/base/clock.h"
#include "common/job/job_result.h"
#include "common/job/progress.h"
#include "proto/job.pb.h"
#include "worker/device_plan.h"

namespace psc {
namespace worker {

// Trains `job` (validated, see JobSpecFromFlags) on `devices` (by default
// the CPU backend alone; with several logical devices, one replica each,
// the batch split over them): epochs x steps_per_epoch steps of
// batch_size, validation after every epoch, the test split at the end.
// `progress` (may be null) gets the Keras-style lines. `final_params` (may
// be null) gets the trained variables in model order. `clock` (not owned;
// the system clock when null) times the run.
absl::StatusOr<job::JobResult> TrainStandalone(
    const proto::JobSpec& job, job::ProgressPrinter* progress,
    std::vector<std::vector<float>>* final_params = nullptr,
    const DeviceSetup& devices = DeviceSetup(), base::Clock* clock = nullptr);

}  // namespace worker
}  // namespace psc

#endif  // PSC_WORKER_STANDALONE_TRAINER_H_
