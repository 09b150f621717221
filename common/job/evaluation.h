// Loss and accuracy of a model over a whole split, in fixed-size batches.
#ifndef PSC_COMMON_JOB_EVALUATION_H_
#define PSC_COMMON_JOB_EVALUATION_H_

#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "common/compute/model.h"
#include "common/data/dataset.h"
#include "common/job/compiled_metrics.h"
#include "common/job/job_loss.h"

namespace psc {
namespace job {

struct SplitMetrics {
  double loss = 0;  // mean over the examples
  double accuracy = 0;
  int64_t examples = 0;
  MetricValues metrics;  // the job's compiled metrics (compiled_metrics.h)
};

// Runs `executor` (whose parameters are set) forward over every example of
// `split`, `batch` at a time (the last batch may be smaller). 250 keeps the
// seed CNN's activations near 100 MB; per example the cost is the same as at
// larger batches. An empty split gives examples 0 (and loss and accuracy 0).
// The loss is `loss`'s (label smoothing, and the split's weights if it has
// them), shown as Keras shows it (JobLoss::Shown); `metrics` are computed
// on the model's outputs. `before_batch`, when set, is called with each
// batch's `n` standardized examples of `per_example` values before it runs
// (the chief rewrites the ids of tables pulled by rows and pulls their rows:
// chief/evaluation_parameters.h).
using BeforeBatch =
    std::function<absl::Status(std::vector<float>* inputs, int64_t n, int64_t per_example)>;
absl::StatusOr<SplitMetrics> EvaluateSplit(compute::Executor* executor, const data::Split& split,
                                           const JobLoss& loss = JobLoss(),
                                           const std::vector<proto::CompiledMetric>& metrics = {},
                                           int64_t batch = 250,
                                           const BeforeBatch& before_batch = nullptr);

}  // namespace job
}  // namespace psc

#endif  // PSC_COMMON_JOB_EVALUATION_H_
