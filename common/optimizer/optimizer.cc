#include "common/optimizer/optimizer.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace psc {
namespace optimizer {

absl::StatusOr<proto::OptimizerConfig> CompleteOptimizerConfig(proto::OptimizerConfig c) {
  using K = proto::OptimizerConfig;
  if (c.kind() != K::SGD && c.kind() != K::MOMENTUM && c.kind() != K::ADAM) {
    return absl::InvalidArgumentError("optimizer: kind must be SGD, MOMENTUM or ADAM");
  }
  if (c.learning_rate() == 0) c.set_learning_rate(c.kind() == K::ADAM ? 0.001 : 0.01);
  if (!std::isfinite(c.learning_rate()) || c.learning_rate() <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("optimizer: learning_rate ", c.learning_rate(), " must be finite and > 0"));
  }
  if (c.kind() == K::MOMENTUM) {
    if (c.momentum() == 0) c.set_momentum(0.9);
    if (!(c.momentum() > 0 && c.momentum() < 1)) {
      return absl::InvalidArgumentError(
          absl::StrCat("optimizer: momentum ", c.momentum(), " must be in (0, 1)"));
    }
  } else if (c.momentum() != 0 || c.nesterov()) {
    return absl::InvalidArgumentError("optimizer: momentum and nesterov apply to MOMENTUM only");
  }
  if (c.kind() == K::ADAM) {
    if (c.beta_1() == 0) c.set_beta_1(0.9);
    if (c.beta_2() == 0) c.set_beta_2(0.999);
    if (c.epsilon() == 0) c.set_epsilon(1e-7);
    if (!(c.beta_1() > 0 && c.beta_1() < 1)) {
      return absl::InvalidArgumentError(
          absl::StrCat("optimizer: beta_1 ", c.beta_1(), " must be in (0, 1)"));
    }
    if (!(c.beta_2() > 0 && c.beta_2() < 1)) {
      return absl::InvalidArgumentError(
          absl::StrCat("optimizer: beta_2 ", c.beta_2(), " must be in (0, 1)"));
    }
    if (!(c.epsilon() > 0) || !std::isfinite(c.epsilon())) {
      return absl::InvalidArgumentError(
          absl::StrCat("optimizer: epsilon ", c.epsilon(), " must be finite and > 0"));
    }
  } else if (c.beta_1() != 0 || c.beta_2() != 0 || c.epsilon() != 0) {
    return absl::InvalidArgumentError("optimizer: beta_1, beta_2 and epsilon apply to ADAM only");
  }
  return c;
}

absl::Status CheckMovingAverageMomentum(float momentum, const std::string& variable) {
  if (!std::isfinite(momentum) || momentum < 0 || momentum > 1) {
    return absl::InvalidArgumentError(absl::StrCat("moving average \"", variable, "\": momentum ",
                                                   momentum, " must be finite and in [0, 1]"));
  }
  return absl::OkStatus();
}

void ApplyMovingAverage(float* var, const float* statistic, size_t n, float momentum) {
  if (momentum == 1.0f) return;  // frozen
  const float m = momentum;
  const float one_minus = static_cast<float>(1.0 - static_cast<double>(momentum));
  for (size_t i = 0; i < n; ++i) var[i] = var[i] * m + statistic[i] * one_minus;
}

absl::StatusOr<proto::OptimizerConfig::Kind> ParseOptimizerKind(const std::string& name) {
  if (name == "sgd") return proto::OptimizerConfig::SGD;
  if (name == "momentum") return proto::OptimizerConfig::MOMENTUM;
  if (name == "adam") return proto::OptimizerConfig::ADAM;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown optimizer \"", name, "\"; expected sgd, momentum or adam"));
}

std::string OptimizerText(const proto::OptimizerConfig& c) {
  switch (c.kind()) {
    case proto::OptimizerConfig::ADAM:
      return absl::StrCat("adam, lr ", c.learning_rate(), " (beta_1 ", c.beta_1(), ", beta_2 ",
                          c.beta_2(), ", epsilon ", c.epsilon(), ")");
    case proto::OptimizerConfig::MOMENTUM:
      return absl::StrCat("sgd with momentum ", c.momentum(), c.nesterov() ? " (nesterov)" : "",
                          ", lr ", c.learning_rate());
    default:
      return absl::StrCat("sgd, lr ", c.learning_rate());
  }
}

Optimizer::Optimizer(const proto::OptimizerConfig& config) : config_(config) {
  if (config.kind() == proto::OptimizerConfig::MOMENTUM) slot_names_ = {"momentum"};
  if (config.kind() == proto::OptimizerConfig::ADAM) slot_names_ = {"m", "v"};
}

void Optimizer::Apply(float* var, const float* grad, size_t n, float* const* slots,
                      int64_t iteration) const {
  const float lr = static_cast<float>(config_.learning_rate());
  switch (config_.kind()) {
    case proto::OptimizerConfig::SGD:
      for (size_t i = 0; i < n; ++i) var[i] -= lr * grad[i];
      return;
    case proto::OptimizerConfig::MOMENTUM: {
      const float mu = static_cast<float>(config_.momentum());
      float* m = slots[0];
      if (config_.nesterov()) {
        for (size_t i = 0; i < n; ++i) {
          m[i] = mu * m[i] - lr * grad[i];
          var[i] += mu * m[i] - lr * grad[i];
        }
      } else {
        for (size_t i = 0; i < n; ++i) {
          m[i] = mu * m[i] - lr * grad[i];
          var[i] += m[i];
        }
      }
      return;
    }
    case proto::OptimizerConfig::ADAM: {
      const double t = static_cast<double>(iteration + 1);
      const double b1 = config_.beta_1(), b2 = config_.beta_2();
      const float alpha = static_cast<float>(
          config_.learning_rate() * std::sqrt(1 - std::pow(b2, t)) / (1 - std::pow(b1, t)));
      const float one_minus_b1 = static_cast<float>(1 - b1);
      const float one_minus_b2 = static_cast<float>(1 - b2);
      const float eps = static_cast<float>(config_.epsilon());
      float* m = slots[0];
      float* v = slots[1];
      for (size_t i = 0; i < n; ++i) {
        const float g = grad[i];
        m[i] += (g - m[i]) * one_minus_b1;
        v[i] += (g * g - v[i]) * one_minus_b2;
        var[i] -= alpha * m[i] / (std::sqrt(v[i]) + eps);
      }
      return;
    }
    default:
      return;
  }
}

}  // namespace optimizer
}  // namespace psc
