#include "common/optimizer/loss_scale.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"

namespace psc {
namespace optimizer {
namespace {

constexpr int64_t kMaxGrowthSteps = int64_t{1} << 40;

bool NormalFloat(double v) {
  return std::isfinite(v) && v >= std::numeric_limits<float>::min() &&
         v <= std::numeric_limits<float>::max();
}

}  // namespace

proto::LossScaleConfig KerasLossScale() {
  proto::LossScaleConfig c;
  c.set_initial_scale(32768.0);
  c.set_growth_steps(2000);
  return c;
}

absl::Status CheckLossScaleConfig(const proto::LossScaleConfig& config) {
  if (!NormalFloat(config.initial_scale())) {
    return absl::InvalidArgumentError(
        absl::StrCat("the initial loss scale ", config.initial_scale(),
                     " is not a float32 number in [2^-126, 2^127] (Keras's default: 32768)"));
  }
  if (config.growth_steps() < 1 || config.growth_steps() > kMaxGrowthSteps) {
    return absl::InvalidArgumentError(
        absl::StrCat("the loss scale's growth steps ", config.growth_steps(),
                     " are not in [1, 2^40] (Keras's dynamic_growth_steps: 2000)"));
  }
  return absl::OkStatus();
}

LossScale::LossScale(const proto::LossScaleConfig& config)
    : growth_steps_(config.growth_steps()), scale_(static_cast<float>(config.initial_scale())) {}

void LossScale::Update(bool finite, float used) {
  if (!finite) ++skipped_steps_;  // skipped whatever its scale
  if (used > scale_) return;      // a verdict on a scale no longer current
  if (!finite) {
    scale_ = std::max(scale_ * 0.5f, kMinLossScale);
    good_steps_ = 0;
    return;
  }
  if (good_steps_ == growth_steps_ - 1) {
    // Keras's float32 scale would double to infinity past 2^127, and then
    // every step would overflow for good: it stays instead.
    if (std::isfinite(scale_ * 2.0f)) scale_ *= 2.0f;
    good_steps_ = 0;
  } else {
    ++good_steps_;
  }
}

proto::LossScaleState LossScale::State() const {
  proto::LossScaleState s;
  s.set_scale(scale_);
  s.set_good_steps(good_steps_);
  s.set_skipped_steps(skipped_steps_);
  return s;
}

absl::Status LossScale::Restore(const proto::LossScaleState& state, const char* where) {
  // Every scale Update makes: a float32 in [kMinLossScale, its largest].
  const double s = state.scale();
  if (!std::isfinite(s) || !(s >= kMinLossScale) || s > std::numeric_limits<float>::max() ||
      static_cast<double>(static_cast<float>(s)) != s) {
    return absl::DataLossError(
        absl::StrCat(where, ": the loss scale ", s, " is not a positive finite float32"));
  }
  if (state.good_steps() < 0 || state.skipped_steps() < 0) {
    return absl::DataLossError(absl::StrCat(where, ": the loss scale's counters (",
                                            state.good_steps(), " finite steps, ",
                                            state.skipped_steps(), " skipped) are negative"));
  }
  scale_ = static_cast<float>(s);
  good_steps_ = std::min(state.good_steps(), growth_steps_ - 1);
  skipped_steps_ = state.skipped_steps();
  return absl::OkStatus();
}

bool UnscaleGradients(float scale, const std::vector<bool>& scaled,
                      std::vector<std::vector<float>>* grads) {
  bool finite = true;
  for (size_t v = 0; v < grads->size(); ++v) {
    std::vector<float>& g = (*grads)[v];
    const bool divide = v < scaled.size() && scaled[v];
    bool ok = true;
    // Keras divides (ops.divide(g, scale)); so does this, then checks.
#pragma omp simd reduction(&& : ok)
    for (size_t i = 0; i < g.size(); ++i) {
      const float x = divide ? g[i] / scale : g[i];
      g[i] = x;
      ok = ok && std::isfinite(x);
    }
    finite = finite && ok;
  }
  if (!finite) {
    for (std::vector<float>& g : *grads) std::fill(g.begin(), g.end(), 0.0f);
  }
  return finite;
}

}  // namespace optimizer
}  // namespace psc
