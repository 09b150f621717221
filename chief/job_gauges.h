// What the chief's metrics report while the job runs (pscluster_chief_*):
// the step and epoch, the epoch's loss and accuracy so far, the last
// validation, throughput, and the workers live and lost and the
// recoveries. The job (JobReport, JobRunner) writes it; the metrics
// exporter reads it at each scrape.
#ifndef PSC_CHIEF_JOB_GAUGES_H_
#define PSC_CHIEF_JOB_GAUGES_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "prometheus/metric_family.h"

namespace psc {
namespace chief {

// Thread-safe.
class JobGauges {
 public:
  struct Snapshot {
    int64_t step = 0;  // the global step reached
    int64_t total_steps = 0;
    int64_t epoch = 0;  // 1-based, the epoch running (or the last one)
    int64_t epochs = 0;
    double loss = 0;      // the running epoch's units so far (Keras's bar)
    double accuracy = 0;  // idem
    bool evaluated = false;
    double val_loss = 0;  // the last validation point
    double val_accuracy = 0;
    double examples_per_second = 0;  // over the running epoch's wall time
    int64_t workers = 0;             // in TF_CONFIG
    int64_t workers_live = 0;
    int64_t workers_lost = 0;        // losses so far (a worker lost twice counts twice)
    int64_t workers_rejoined = 0;    // lost workers that took part again
    int64_t workers_joined_new = 0;  // new workers that joined
    int64_t workers_drained = 0;     // workers that left, drained
    int64_t recoveries = 0;          // server restores from a checkpoint
    int64_t checkpoints = 0;
    bool finished = false;  // the job ended (either way)
  };

  void Update(const std::function<void(Snapshot*)>& change) ABSL_LOCKS_EXCLUDED(mu_);
  Snapshot Get() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  mutable absl::Mutex mu_;
  Snapshot snapshot_ ABSL_GUARDED_BY(mu_);
};

// The families of one snapshot, unlabelled (one chief per cluster).
std::vector<prometheus::MetricFamily> ChiefMetricFamilies(const JobGauges::Snapshot& s);

}  // namespace chief
}  // namespace psc

#endif  // PSC_CHIEF_JOB_GAUGES_H_
