// Keras's compiled metrics beyond the loss and the accuracy (JobSpec.metrics:
// mae, mse, root_mean_squared_error, Precision, Recall, AUC,
// binary_accuracy), computed as Keras 3.15 computes them: for a regression
// on the outputs against the float targets; for a classifier trained on
// one-hot labels: on the model's
// outputs (its logits, or its softmax when it ends in one) against the
// one-hot rows, every element counted alike, unweighted; for a binary
// classifier, its one output against the 0/1 label. A worker sums a
// unit's training batches, the chief adds the units' sums and each
// evaluation sums its split; the values come from the sums, so they do not
// depend on how the examples were split over workers or batches.
//
// Keras's rules, followed here: Precision and Recall count an output above
// 0.5 as positive; AUC (ROC, interpolated, num_thresholds T) puts each
// output, clipped to [0, 1], in bucket max(ceil(p * (T - 1)) - 1, 0)
// (float32 arithmetic), and sums trapezoids of (false positive rate, true
// positive rate) over the T thresholds. A ratio with a zero denominator is 0
// (Keras's divide_no_nan).
#ifndef PSC_COMMON_JOB_COMPILED_METRICS_H_
#define PSC_COMMON_JOB_COMPILED_METRICS_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "proto/job.pb.h"
#include "proto/worker.pb.h"

namespace psc {
namespace job {

using MetricValues = std::vector<std::pair<std::string, double>>;

// Thread-compatible.
class MetricSums {
 public:
  MetricSums() = default;
  explicit MetricSums(std::vector<proto::CompiledMetric> metrics);

  // Whether there is any metric to compute (callers skip the outputs then).
  bool empty() const { return metrics_.empty(); }

  // A batch: outputs [n, classes] row-major as the model outputs them, and
  // n class ids in [0, classes) (checked by the loss before); with one
  // output unit (classes 1, a binary classifier) n labels 0 or 1. A
  // regression passes its targets (n x classes floats, the labels then
  // unused): the outputs are compared with them (mae, mse,
  // root_mean_squared_error; the other metrics are refused for it).
  void Add(absl::Span<const float> outputs, absl::Span<const int32_t> labels, int64_t classes,
           absl::Span<const float> targets = {});
  // Another's sums (a unit's, a replica's). INVALID_ARGUMENT when its AUC
  // buckets are not this job's (another num_thresholds); nothing is added.
  absl::Status Add(const proto::MetricSums& other);
  void Clear();

  const proto::MetricSums& sums() const { return sums_; }
  // Each metric's value, in the job's order, named as Keras's History.
  MetricValues Values() const;

 private:
  std::vector<proto::CompiledMetric> metrics_;
  int auc_buckets_ = 0;  // the first AUC's num_thresholds (0: no AUC)
  proto::MetricSums sums_;
};

// The job's compiled metrics, as MetricSums and EvaluateSplit take them.
inline std::vector<proto::CompiledMetric> MetricsOf(const proto::JobSpec& job) {
  return {job.metrics().begin(), job.metrics().end()};
}

// Keras's AUC (ROC, interpolation) from bucket counts of positives and
// negatives, T = their size (the thresholds). Exposed for its test.
double RocAuc(absl::Span<const int64_t> positive, absl::Span<const int64_t> negative);

}  // namespace job
}  // namespace psc

#endif  // PSC_COMMON_JOB_COMPILED_METRICS_H_
