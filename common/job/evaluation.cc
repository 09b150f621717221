#include "common/job/evaluation.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"

namespace psc {
namespace job {

absl::StatusOr<SplitMetrics> EvaluateSplit(compute::Executor* executor, const data::Split& split,
                                           const JobLoss& loss_kind,
                                           const std::vector<proto::CompiledMetric>& metrics,
                                           int64_t batch, const BeforeBatch& before_batch) {
  if (batch < 1) return absl::InvalidArgumentError("evaluation batch must be >= 1");
  if (split.count == 0) return SplitMetrics{};  // no such split (an .npz without x_test)
  const int64_t pixels = split.pixels_per_example();
  if (!split.Consistent()) {
    return absl::InvalidArgumentError(
        absl::StrCat("split of ", split.count, " examples has ", split.pixels.size(), " pixels, ",
                     split.labels.size(), " labels and ", split.weights.size(), " weights"));
  }
  // Both batch sizes this runs (the last may be partial), planned up front.
  PSC_RETURN_IF_ERROR(executor->Prepare({std::min(batch, split.count), split.count % batch},
                                        /*training=*/false));
  double loss = 0;
  int64_t correct = 0;
  MetricSums sums(metrics);
  std::vector<float> outputs;
  std::vector<float> images(std::min(batch, split.count) * pixels);  // one batch, standardized
  for (int64_t start = 0; start < split.count; start += batch) {
    const int64_t n = std::min(batch, split.count - start);
    split.Standardize(start, n, images.data());
    if (before_batch) PSC_RETURN_IF_ERROR(before_batch(&images, n, pixels));
    compute::StepResult r;
    const absl::Span<const float> weights =
        split.weights.empty() ? absl::Span<const float>()
                              : absl::MakeConstSpan(split.weights).subspan(start, n);
    const absl::Span<const float> targets =
        split.targets.empty() ? absl::Span<const float>()
                              : absl::MakeConstSpan(split.targets)
                                    .subspan(start * split.target_width, n * split.target_width);
    PSC_RETURN_IF_ERROR(executor->Evaluate(absl::MakeConstSpan(images).subspan(0, n * pixels),
                                           absl::MakeConstSpan(split.labels).subspan(start, n),
                                           loss_kind.Eval(weights, targets), &r));
    loss += r.loss_sum;
    correct += r.correct;
    if (!sums.empty()) {
      PSC_RETURN_IF_ERROR(executor->CopyOutputs(&outputs));
      sums.Add(outputs, absl::MakeConstSpan(split.labels).subspan(start, n),
               executor->model().classes(), targets);
    }
  }
  return SplitMetrics{loss_kind.Shown(loss / split.count), loss_kind.Accuracy(correct, split.count),
                      split.count, sums.Values()};
}

}  // namespace job
}  // namespace psc
