#include "common/job/evaluation.h"

#include <algorithm>

#include "common/base/status_macros.h"

namespace psc {
namespace job {

absl::StatusOr<SplitMetrics> EvaluateSplit(compute::Executor* executor, const data::Split& split,
                                           int64_t batch) {
  if (batch < 1) return absl::InvalidArgumentError("evaluation batch must be >= 1");
  if (split.count < 1) return absl::InvalidArgumentError("cannot evaluate an empty split");
  const int64_t pixels = static_cast<int64_t>(split.height) * split.width;
  double loss = 0;
  int64_t correct = 0;
  for (int64_t start = 0; start < split.count; start += batch) {
    const int64_t n = std::min(batch, split.count - start);
    compute::StepResult r;
    PSC_RETURN_IF_ERROR(
        executor->Evaluate(absl::MakeConstSpan(split.images).subspan(start * pixels, n * pixels),
                           absl::MakeConstSpan(split.labels).subspan(start, n), &r));
    loss += r.loss_sum;
    correct += r.correct;
  }
  return SplitMetrics{loss / split.count, static_cast<double>(correct) / split.count, split.count};
}

}  // namespace job
}  // namespace psc
