#include "common/compute/regression_loss.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace psc {
namespace compute {
namespace {

constexpr const char* kRegressionOp = "RegressionLoss";

// One element's loss and its derivative in the output, for error e = o - t.
struct Term {
  double loss, grad;
};

Term ElementTerm(LossKind kind, double e, double delta) {
  switch (kind) {
    case LossKind::kMeanSquaredError:
      return {e * e, 2 * e};
    case LossKind::kMeanAbsoluteError:
      return {std::abs(e), static_cast<double>((e > 0) - (e < 0))};
    default: {  // kHuber
      const double a = std::abs(e);
      if (a <= delta) return {0.5 * e * e, e};
      return {delta * a - 0.5 * delta * delta, e > 0 ? delta : -delta};
    }
  }
}

}  // namespace

absl::Status RegressionLoss(absl::Span<const float> outputs, int64_t units,
                            const LossOptions& options, absl::Span<float> doutputs,
                            double* loss_sum) {
  if (!IsRegression(options.kind)) {
    return absl::InvalidArgumentError(
        absl::StrCat(kRegressionOp, ": the loss is not a regression"));
  }
  const int64_t size = static_cast<int64_t>(outputs.size());
  if (units < 1 || size % units != 0 || static_cast<int64_t>(options.targets.size()) != size ||
      static_cast<int64_t>(doutputs.size()) != size) {
    return absl::InvalidArgumentError(
        absl::StrCat(kRegressionOp, ": ", outputs.size(), " outputs of ", units, " unit(s), ",
                     options.targets.size(), " targets and ", doutputs.size(),
                     " gradients; want n x units of each"));
  }
  const int64_t n = size / units;
  if (!options.weights.empty() && static_cast<int64_t>(options.weights.size()) != n) {
    return absl::InvalidArgumentError(
        absl::StrCat(kRegressionOp, ": ", options.weights.size(), " weights for ", n, " examples"));
  }
  const double delta = options.huber_delta;
  if (options.kind == LossKind::kHuber && !(delta > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat(kRegressionOp, ": huber delta ", delta, " is not > 0"));
  }
  double loss = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double w = options.weights.empty() ? 1.0 : options.weights[i];
    // The mean over the units, and its gradient's 1/units.
    const double scale = w * options.grad_scale / static_cast<double>(units);
    double row = 0;
    for (int64_t j = i * units; j < (i + 1) * units; ++j) {
      const Term t =
          ElementTerm(options.kind, static_cast<double>(outputs[j]) - options.targets[j], delta);
      row += t.loss;
      doutputs[j] = static_cast<float>(t.grad * scale);
    }
    loss += w * row / static_cast<double>(units);
  }
  *loss_sum = loss;
  return absl::OkStatus();
}

}  // namespace compute
}  // namespace psc
