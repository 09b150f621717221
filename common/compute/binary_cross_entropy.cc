#include "common/compute/binary_cross_entropy.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace psc {
namespace compute {
namespace {

constexpr const char* kOp = "BinaryCrossEntropy";

// log(1 + e^x) without overflow.
double Softplus(double x) { return std::max(x, 0.0) + std::log1p(std::exp(-std::abs(x))); }

}  // namespace

absl::Status BinaryCrossEntropy(absl::Span<const float> outputs, absl::Span<const int32_t> labels,
                                bool from_logits, const LossOptions& options,
                                absl::Span<float> doutputs, double* loss_sum, int64_t* correct) {
  const size_t n = outputs.size();
  if (labels.size() != n || doutputs.size() != n) {
    return absl::InvalidArgumentError(absl::StrCat(kOp, ": ", n, " outputs, ", labels.size(),
                                                   " labels and ", doutputs.size(),
                                                   " gradients; want one of each per example"));
  }
  if (!options.weights.empty() && options.weights.size() != n) {
    return absl::InvalidArgumentError(
        absl::StrCat(kOp, ": ", options.weights.size(), " weights for ", n, " examples"));
  }
  if (!(options.label_smoothing >= 0 && options.label_smoothing <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat(kOp, ": label_smoothing ", options.label_smoothing, " is not in [0, 1]"));
  }
  for (size_t i = 0; i < n; ++i) {
    if (labels[i] != 0 && labels[i] != 1) {
      return absl::InvalidArgumentError(
          absl::StrCat(kOp, ": label ", labels[i], " of example ", i, " is not 0 or 1"));
    }
  }
  // Keras's epsilon() (1e-7) and 1 - epsilon(), as float32 clips them.
  const float lo = 1e-7f, hi = 1.0f - 1e-7f;
  const double s = options.label_smoothing;
  double loss = 0;
  int64_t right = 0;
  for (size_t i = 0; i < n; ++i) {
    const double t = labels[i] * (1.0 - s) + 0.5 * s;
    const double w = options.weights.empty() ? 1.0 : options.weights[i];
    const float out = outputs[i];
    double row, grad;
    if (from_logits) {
      const double z = out;
      row = t * Softplus(-z) + (1.0 - t) * Softplus(z);
      grad = 1.0 / (1.0 + std::exp(-z)) - t;
    } else {
      const double p = std::fmin(std::fmax(out, lo), hi);
      row = -(t * std::log(p) + (1.0 - t) * std::log(1.0 - p));
      const double pass = out > lo && out < hi ? 1.0 : (out == lo || out == hi ? 0.5 : 0.0);
      grad = pass * (-(t / p) + (1.0 - t) / (1.0 - p));
    }
    loss += w * row;
    doutputs[i] = static_cast<float>(grad * w * options.grad_scale);
    right += (out > 0.5f) == (labels[i] == 1);
  }
  *loss_sum = loss;
  *correct = right;
  return absl::OkStatus();
}

}  // namespace compute
}  // namespace psc
