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
//   AdamW:     Adam, with weight_decay 0.004 unless given
//   RMSprop:   v = rho * v + (1 - rho) * g^2
//              (centered: a = rho * a + (1 - rho) * g; d = v - a^2 + epsilon;
//               else d = v + epsilon)
//              inc = lr * g / sqrt(d)
//              momentum > 0: m = momentum * m + inc; w -= m   (else w -= inc)
//   Adagrad:   acc += g^2  (acc starts at initial_accumulator_value)
//              w -= lr * g / sqrt(acc + epsilon)
//
// Keras 3's gradient clipping, for every kind, first: clipvalue clips each
// element to [-clipvalue, clipvalue]; clipnorm scales a variable's gradient
// g to g * clipnorm / max(|g|, clipnorm) (|g| its L2 norm, in double). The
// gradient is the one applied: in sync the replicas' mean, as Keras clips
// the whole batch's; a partitioned variable's norm would span servers, so
// the chief refuses clipnorm where a variable is partitioned.
//
// Keras 3's decoupled weight decay, for every kind: before the update,
// w -= w * weight_decay * lr (each trainable variable; Keras 3's base
// optimizer, unless exclude_from_weight_decay, which has no config key).
//
// Defaults for fields left 0: learning_rate 0.01 (SGD, momentum) or 0.001
// (the others); momentum 0.9 (MOMENTUM); beta_1 0.9, beta_2 0.999; rho
// 0.9; epsilon 1e-7; initial_accumulator_value 0.1 (Adagrad).
//
// Also here: the update of a non-trainable moving average (Keras
// BatchNormalization's moving_mean and moving_variance), which takes no
// optimizer: v = v * momentum + statistic * (1 - momentum).
#ifndef PSC_COMMON_OPTIMIZER_OPTIMIZER_H_
#define PSC_COMMON_OPTIMIZER_OPTIMIZER_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/job.pb.h"

namespace psc {
namespace optimizer {

// `config` with Keras defaults in the fields left 0, validated:
// INVALID_ARGUMENT naming the field (unspecified kind, learning rate not
// finite and > 0, momentum outside [0, 1), betas or rho outside (0, 1),
// epsilon <= 0, initial_accumulator_value or weight_decay < 0, clipvalue
// or clipnorm < 0 or both set, a field of another kind).
absl::StatusOr<proto::OptimizerConfig> CompleteOptimizerConfig(proto::OptimizerConfig config);

// OK when `momentum` is a valid moving-average momentum (finite, in
// [0, 1]; 1 is a frozen variable, a layer's with trainable=False, which
// never changes); else INVALID_ARGUMENT naming `variable`.
absl::Status CheckMovingAverageMomentum(float momentum, const std::string& variable);

// Whether a variable of this rule (nullopt: trainable; else a moving
// average's momentum) is frozen: momentum 1 never changes it, whatever its
// statistic, so no push carries a gradient for it (docs/design-notes.md,
// "Frozen variables").
inline bool IsFrozen(std::optional<float> moving_average) {
  return moving_average.has_value() && *moving_average == 1.0f;
}

// One moving-average update of the n values of `var` with the batch
// statistic `statistic` (the batch mean or variance), as Keras does it in
// float32: var[i] = var[i] * m + statistic[i] * one_minus, with
// m = momentum and one_minus = float(1 - double(momentum)). No learning
// rate, no slots, no iteration. `momentum` must pass
// CheckMovingAverageMomentum; with momentum 1 (frozen) var is left as it
// is, whatever the statistic.
void ApplyMovingAverage(float* var, const float* statistic, size_t n, float momentum);

// OK unless `config` clips by norm and `placement` splits a variable over
// servers: each server would clip its part by the part's norm, not by the
// whole variable's as Keras does. INVALID_ARGUMENT naming the variable and
// what to do instead.
absl::Status CheckClipnormPlacement(const proto::OptimizerConfig& config,
                                    const proto::Placement& placement);

// The learning rate of the update after `iteration` earlier ones (Keras's
// optimizer.iterations): `config`'s learning_rate, or its schedule's value
// at that step, as Keras 3 defines them (computed in double):
//   ExponentialDecay: lr * decay_rate^(step / decay_steps) (the exponent
//     floored when staircase);
//   PiecewiseConstantDecay: values[0] while step <= boundaries[0], values[i]
//     while boundaries[i-1] < step <= boundaries[i], the last value after;
//   CosineDecay: with warmup_target, lr + (target - lr) * step /
//     warmup_steps during the warmup, then the decay from the target; the
//     decay from r over decay_steps is r * ((1 - alpha) * c + alpha),
//     c = (1 + cos(pi * min(s, decay_steps) / decay_steps)) / 2.
// In sync the iteration is the global step; in async each applied push
// counts one (the servers' update count), as TensorFlow's global step does.
double LearningRateAt(const proto::OptimizerConfig& config, int64_t iteration);

// "cosine_decay (decay_steps 100, alpha 0, warmup to 0.1 over 10 steps)"
// and the like; "" without a schedule.
std::string ScheduleText(const proto::LearningRateSchedule& schedule);

// Parses "sgd", "momentum", "adam", "adamw", "rmsprop" or "adagrad".
absl::StatusOr<proto::OptimizerConfig::Kind> ParseOptimizerKind(const std::string& name);

// What runs, for people: "adam, lr 0.001 (beta_1 0.9, beta_2 0.999,
// epsilon 1e-07)", "sgd, lr 0.01", "sgd with momentum 0.9 (nesterov), lr
// 0.01".
std::string OptimizerText(const proto::OptimizerConfig& config);

// Keras's clip_by_global_norm (config.global_clipnorm): the joint L2 norm
// of the gradients with trainable[v] (in double; not a moving average's
// statistic, not a frozen variable's), and when it is above
// global_clipnorm each of those gradients times global_clipnorm / norm.
// Returns the norm. A non-finite norm leaves the gradients as they are (the
// servers refuse them; Keras would make them NaN). Optimizer::Apply does
// not clip by the global norm: a worker clips what it sends, as the whole
// gradient is there (in sync with R > 1 replicas each replica's, before
// the servers average them: Keras clips the average).
double ClipByGlobalNorm(double global_clipnorm, const std::vector<bool>& trainable,
                        std::vector<std::vector<float>>* grads);

// Immutable; thread-safe.
class Optimizer {
 public:
  // `config` must come from CompleteOptimizerConfig.
  explicit Optimizer(const proto::OptimizerConfig& config);

  const proto::OptimizerConfig& config() const { return config_; }

  // Slot vectors kept per variable, each as large as the variable:
  // SGD none, momentum {"momentum"}, Adam and AdamW {"m", "v"}, RMSprop
  // {"velocity"} then "momentum" (momentum > 0) and "average_gradient"
  // (centered), Adagrad {"accumulator"}.
  const std::vector<std::string>& slot_names() const { return slot_names_; }
  // Each slot's value before the first update (Adagrad's accumulator:
  // initial_accumulator_value; the others 0).
  const std::vector<float>& slot_initial_values() const { return slot_initial_values_; }
  // Whether Keras orders the optimizer's variables variable by variable
  // (each variable's slots together: SGD's momentum, Adam's momentum and
  // velocity), or slot by slot (RMSprop: every velocity, then every
  // momentum, then every average gradient).
  bool keras_slots_per_variable() const;

  // Applies one update to the n values of `var` with gradient `grad`.
  // `slots` holds slot_names().size() arrays of n floats, at
  // slot_initial_values() at first.
  // `iteration` counts the updates applied before this one (Adam's t - 1).
  void Apply(float* var, const float* grad, size_t n, float* const* slots, int64_t iteration) const;

 private:
  proto::OptimizerConfig config_;
  std::vector<std::string> slot_names_;
  std::vector<float> slot_initial_values_;
};

}  // namespace optimizer
}  // namespace psc

#endif  // PSC_COMMON_OPTIMIZER_OPTIMIZER_H_
