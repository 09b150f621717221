// The optimizers a parameter-server shard (and the single-process trainer)
// runs, with Keras's defaults and update formulas (tf.keras.optimizers, 2.11+):
//
//   SGD:       w -= lr * g
//   momentum:  m = momentum * m - lr * g
//              w += m                                   (nesterov: w += momentum * m - lr * g)
//   Adam:      t = iteration + 1
//              alpha = lr * sqrt(1 - beta_2^t) / (1 - beta_1^t)
//              m += (g - m) * (1 - beta_1);  v += (g^2 - v) * (1 - beta_2)
//              w -= alpha * m / (sqrt(v) + epsilon)
//
// Defaults for fields left 0: learning_rate 0.01 (SGD, momentum) or 0.001
// (Adam); momentum 0.9; beta_1 0.9, beta_2 0.999, epsilon 1e-7.
//
// Also here: the update of a non-trainable moving average (Keras
// BatchNormalization's moving_mean and moving_variance), which takes no
// optimizer: v = v * momentum + statistic * (1 - momentum).
#ifndef PSC_COMMON_OPTIMIZER_OPTIMIZER_H_
#define PSC_COMMON_OPTIMIZER_OPTIMIZER_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/job.pb.h"

namespace psc {
namespace optimizer {

// `config` with Keras defaults in the fields left 0, validated:
// INVALID_ARGUMENT naming the field (unspecified kind, learning rate not
// finite and > 0, momentum outside [0, 1), betas outside [0, 1), epsilon <= 0).
absl::StatusOr<proto::OptimizerConfig> CompleteOptimizerConfig(proto::OptimizerConfig config);

// OK when `momentum` is a valid moving-average momentum (finite, in
// [0, 1]; 1 is a frozen variable, a layer's with trainable=False, which
// never changes); else INVALID_ARGUMENT naming `variable`.
absl::Status CheckMovingAverageMomentum(float momentum, const std::string& variable);

// One moving-average update of the n values of `var` with the batch
// statistic `statistic` (the batch mean or variance), as Keras does it in
// float32: var[i] = var[i] * m + statistic[i] * one_minus, with
// m = momentum and one_minus = float(1 - double(momentum)). No learning
// rate, no slots, no iteration. `momentum` must pass
// CheckMovingAverageMomentum; with momentum 1 (frozen) var is left as it
// is, whatever the statistic.
void ApplyMovingAverage(float* var, const float* statistic, size_t n, float momentum);

// Parses "sgd", "momentum" or "adam".
absl::StatusOr<proto::OptimizerConfig::Kind> ParseOptimizerKind(const std::string& name);

// What runs, for people: "adam, lr 0.001 (beta_1 0.9, beta_2 0.999,
// epsilon 1e-07)", "sgd, lr 0.01", "sgd with momentum 0.9 (nesterov), lr
// 0.01".
std::string OptimizerText(const proto::OptimizerConfig& config);

// Immutable; thread-safe.
class Optimizer {
 public:
  // `config` must come from CompleteOptimizerConfig.
  explicit Optimizer(const proto::OptimizerConfig& config);

  const proto::OptimizerConfig& config() const { return config_; }

  // Slot vectors kept per variable, each as large as the variable:
  // SGD none, momentum {"momentum"}, Adam {"m", "v"}.
  const std::vector<std::string>& slot_names() const { return slot_names_; }

  // Applies one update to the n values of `var` with gradient `grad`.
  // `slots` holds slot_names().size() arrays of n floats, zero at first.
  // `iteration` counts the updates applied before this one (Adam's t - 1).
  void Apply(float* var, const float* grad, size_t n, float* const* slots, int64_t iteration) const;

 private:
  proto::OptimizerConfig config_;
  std::vector<std::string> slot_names_;
};

}  // namespace optimizer
}  // namespace psc

#endif  // PSC_COMMON_OPTIMIZER_OPTIMIZER_H_
