// Keras 3's dynamic loss scaling (keras.optimizers.LossScaleOptimizer),
// which a mixed_float16 model trains with: the loss is multiplied by a
// scale so that float16's small gradients do not flush to zero, the
// gradients are divided by it before the update, and a step whose gradients
// are not finite (the scale was too large) is skipped.
//
//   finite step:  applied; after growth_steps finite steps in a row the
//                 scale doubles (Keras: the counter reaching
//                 dynamic_growth_steps - 1, then reset), unless that would
//                 make it infinite (Keras's would; every step after would
//                 overflow)
//   overflow:     skipped (no update, the optimizer's iterations unchanged);
//                 the scale halves (not below kMinLossScale, 2^-126, where
//                 Keras's would reach 0 and never recover; a worker whose
//                 step overflows there ends the job as diverged) and the
//                 counter restarts
//
// A verdict comes with the scale its step computed with: one of a scale
// above the current one changes the scale and its counter in nothing (async: the other workers'
// steps in flight when the scale halved overflow too, and must not halve it again; nor does a
// finite step at a scale since doubled count toward the next doubling).
//
// Over a cluster (docs/design-notes.md, "Loss scaling") the state is job
// state: every shard keeps a LossScale and updates it at each update it
// applies or skips, the workers compute with shard 0's scale, and every
// push carries its worker's verdict on its whole gradient, so every shard
// decides alike. `worker --standalone` keeps one itself. Thread-compatible.
#ifndef PSC_COMMON_OPTIMIZER_LOSS_SCALE_H_
#define PSC_COMMON_OPTIMIZER_LOSS_SCALE_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "proto/job.pb.h"

namespace psc {
namespace optimizer {

// Keras's defaults: initial_scale 2^15, dynamic_growth_steps 2000.
proto::LossScaleConfig KerasLossScale();

// The smallest scale: float32's smallest normal number.
inline constexpr float kMinLossScale = 1.17549435e-38f;

// INVALID_ARGUMENT unless the initial scale is finite and in
// [2^-126, 2^127] (a float32 normal number) and growth_steps in
// [1, 2^40].
absl::Status CheckLossScaleConfig(const proto::LossScaleConfig& config);

class LossScale {
 public:
  // `config` passed CheckLossScaleConfig.
  explicit LossScale(const proto::LossScaleConfig& config);

  // What a step multiplies its loss by now.
  float scale() const { return scale_; }
  // Records the verdict of a step computed with `used` (see above; 0: now).
  void Update(bool finite, float used = 0);

  proto::LossScaleState State() const;
  // A checkpoint's state: DATA_LOSS (naming `where`) for a scale that is
  // not a float32 in [kMinLossScale, its largest], or negative counters;
  // the state is unchanged then. A count of finite steps at or past this
  // job's growth_steps (a job resumed with fewer) doubles at the next one.
  absl::Status Restore(const proto::LossScaleState& state, const char* where);

 private:
  int64_t growth_steps_;
  float scale_;
  int64_t good_steps_ = 0;
  int64_t skipped_steps_ = 0;
};

// A worker's half: divides each gradient that `scaled` marks (the
// trainable variables'; a moving average's statistic is no gradient of
// the loss) by `scale`, and returns whether every gradient is finite
// afterwards (Keras checks them before the division; after it, a scale
// below 1 that makes a finite value overflow counts too, where Keras would
// apply the infinity).
// When not finite, every gradient is set to zero (the push carries zeros
// and the flag; nothing downstream sees an Inf or NaN).
bool UnscaleGradients(float scale, const std::vector<bool>& scaled,
                      std::vector<std::vector<float>>* grads);

}  // namespace optimizer
}  // namespace psc

#endif  // PSC_COMMON_OPTIMIZER_LOSS_SCALE_H_
