#include "common/compute/loss_ops.h"

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"

namespace psc {
namespace compute {
namespace loss {

absl::Status CheckSoftmaxCrossEntropy(const DeviceTensor& logits, const DeviceTensor& labels,
                                      const DeviceTensor* weights, const OpAttrs& a,
                                      const DeviceTensor& dlogits, const DeviceTensor& loss_sum,
                                      const DeviceTensor& correct) {
  constexpr const char* kOp = kSoftmaxCrossEntropy;
  PSC_RETURN_IF_ERROR(WantRank(kOp, "logits", logits, 2));
  PSC_RETURN_IF_ERROR(WantShape(kOp, "dlogits", dlogits, logits.shape()));
  const int64_t n = logits.shape()[0];
  PSC_RETURN_IF_ERROR(WantTensor(kOp, "labels", labels, DType::kInt32, {n}));
  if (weights != nullptr) PSC_RETURN_IF_ERROR(WantShape(kOp, "weights", *weights, {n}));
  PSC_RETURN_IF_ERROR(WantTensor(kOp, "loss_sum", loss_sum, DType::kFloat64, {1}));
  PSC_RETURN_IF_ERROR(WantTensor(kOp, "correct", correct, DType::kInt64, {1}));
  // Written to accept NaN as out of range.
  if (!(a.label_smoothing >= 0 && a.label_smoothing <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat(kOp, ": label_smoothing ", a.label_smoothing, " is not in [0, 1]"));
  }
  return absl::OkStatus();
}

absl::Status CheckLabels(absl::Span<const int32_t> labels, absl::Span<const float> weights,
                         int64_t n, int64_t m) {
  constexpr const char* kOp = kSoftmaxCrossEntropy;
  if (static_cast<int64_t>(labels.size()) != n) {
    return absl::InvalidArgumentError(
        absl::StrCat(kOp, ": ", labels.size(), " labels for ", n, " examples"));
  }
  if (!weights.empty() && weights.size() != labels.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(kOp, ": ", weights.size(), " weights for ", n, " examples"));
  }
  for (int64_t i = 0; i < n; ++i) {
    if (labels[i] < 0 || labels[i] >= m) {
      return absl::InvalidArgumentError(absl::StrCat(kOp, ": label ", labels[i], " of example ", i,
                                                     " out of range [0, ", m, ")"));
    }
  }
  return absl::OkStatus();
}

}  // namespace loss
}  // namespace compute
}  // namespace psc
