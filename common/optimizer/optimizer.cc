#include "common/optimizer/optimizer.h"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/base/status_macros.h"

namespace psc {
namespace optimizer {

namespace {

// Adam's update of n values, vectorized: the arrays do not overlap, and v
// is never negative, so sqrt needs no errno (the same IEEE operations, in
// the same order, per element: the results are the scalar loop's).
__attribute__((optimize("no-math-errno"))) void AdamUpdate(
    const float* __restrict grad, size_t n, float alpha, float one_minus_b1, float one_minus_b2,
    float eps, float* __restrict var, float* __restrict m, float* __restrict v) {
#pragma omp simd
  for (size_t i = 0; i < n; ++i) {
    const float g = grad[i];
    m[i] += (g - m[i]) * one_minus_b1;
    v[i] += (g * g - v[i]) * one_minus_b2;
    var[i] -= alpha * m[i] / (__builtin_sqrtf(v[i]) + eps);
  }
}

absl::Status CheckSchedule(const proto::LearningRateSchedule& s) {
  using S = proto::LearningRateSchedule;
  auto bad = [](auto... parts) {
    return absl::InvalidArgumentError(
        absl::StrCat("optimizer: learning-rate schedule: ", parts...));
  };
  auto positive = [](double x) { return std::isfinite(x) && x > 0; };
  switch (s.kind()) {
    case S::CONSTANT:
      return absl::OkStatus();
    case S::EXPONENTIAL_DECAY:
      if (!positive(s.decay_steps())) return bad("decay_steps ", s.decay_steps(), " must be > 0");
      if (!positive(s.decay_rate())) return bad("decay_rate ", s.decay_rate(), " must be > 0");
      return absl::OkStatus();
    case S::PIECEWISE_CONSTANT_DECAY:
      if (s.values_size() != s.boundaries_size() + 1) {
        return bad(s.values_size(), " values for ", s.boundaries_size(),
                   " boundaries; want one more value than boundaries");
      }
      for (int i = 0; i < s.boundaries_size(); ++i) {
        if (!std::isfinite(s.boundaries(i)) || (i > 0 && s.boundaries(i) <= s.boundaries(i - 1))) {
          return bad("boundaries must be finite and increasing (", s.boundaries(i), " at ", i, ")");
        }
      }
      for (double v : s.values()) {
        if (!positive(v)) return bad("value ", v, " must be finite and > 0");
      }
      return absl::OkStatus();
    case S::COSINE_DECAY:
      if (!positive(s.decay_steps())) return bad("decay_steps ", s.decay_steps(), " must be > 0");
      if (!(s.alpha() >= 0 && s.alpha() <= 1))
        return bad("alpha ", s.alpha(), " must be in [0, 1]");
      if (s.has_warmup_target() && !positive(s.warmup_target())) {
        return bad("warmup_target ", s.warmup_target(), " must be finite and > 0");
      }
      if (s.warmup_steps() < 0) return bad("warmup_steps ", s.warmup_steps(), " must be >= 0");
      return absl::OkStatus();
    default:
      return bad("unknown kind ", static_cast<int>(s.kind()));
  }
}

}  // namespace

absl::StatusOr<proto::OptimizerConfig> CompleteOptimizerConfig(proto::OptimizerConfig c) {
  using K = proto::OptimizerConfig;
  const K::Kind kind = c.kind();
  if (kind != K::SGD && kind != K::MOMENTUM && kind != K::ADAM && kind != K::ADAMW &&
      kind != K::RMSPROP && kind != K::ADAGRAD && kind != K::FTRL) {
    return absl::InvalidArgumentError(
        "optimizer: kind must be SGD, MOMENTUM, ADAM, ADAMW, RMSPROP, ADAGRAD or FTRL");
  }
  const bool adam = kind == K::ADAM || kind == K::ADAMW;
  const bool sgd = kind == K::SGD || kind == K::MOMENTUM;
  const bool ftrl = kind == K::FTRL;
  if (c.learning_rate() == 0) c.set_learning_rate(sgd ? 0.01 : 0.001);
  if (!std::isfinite(c.learning_rate()) || c.learning_rate() <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("optimizer: learning_rate ", c.learning_rate(), " must be finite and > 0"));
  }
  auto in_open_unit = [](const char* field, double value) -> absl::Status {
    if (value > 0 && value < 1) return absl::OkStatus();
    return absl::InvalidArgumentError(
        absl::StrCat("optimizer: ", field, " ", value, " must be in (0, 1)"));
  };
  if (kind == K::MOMENTUM) {
    if (c.momentum() == 0) c.set_momentum(0.9);
    PSC_RETURN_IF_ERROR(in_open_unit("momentum", c.momentum()));
  } else if (kind == K::RMSPROP) {
    if (!(c.momentum() >= 0 && c.momentum() < 1)) {
      return absl::InvalidArgumentError(
          absl::StrCat("optimizer: momentum ", c.momentum(), " must be in [0, 1)"));
    }
  } else if (c.momentum() != 0) {
    return absl::InvalidArgumentError("optimizer: momentum applies to MOMENTUM and RMSPROP only");
  }
  if (c.nesterov() && kind != K::MOMENTUM) {
    return absl::InvalidArgumentError("optimizer: nesterov applies to MOMENTUM only");
  }
  if (adam) {
    if (c.beta_1() == 0) c.set_beta_1(0.9);
    if (c.beta_2() == 0) c.set_beta_2(0.999);
    PSC_RETURN_IF_ERROR(in_open_unit("beta_1", c.beta_1()));
    PSC_RETURN_IF_ERROR(in_open_unit("beta_2", c.beta_2()));
  } else if (c.beta_1() != 0 || c.beta_2() != 0) {
    return absl::InvalidArgumentError("optimizer: beta_1 and beta_2 apply to ADAM and ADAMW only");
  }
  if (!sgd && !ftrl) {
    if (c.epsilon() == 0) c.set_epsilon(1e-7);
    if (!(c.epsilon() > 0) || !std::isfinite(c.epsilon())) {
      return absl::InvalidArgumentError(
          absl::StrCat("optimizer: epsilon ", c.epsilon(), " must be finite and > 0"));
    }
  } else if (c.epsilon() != 0) {
    return absl::InvalidArgumentError("optimizer: epsilon does not apply to SGD or FTRL");
  }
  if (kind == K::RMSPROP) {
    if (c.rho() == 0) c.set_rho(0.9);
    PSC_RETURN_IF_ERROR(in_open_unit("rho", c.rho()));
  } else if (c.rho() != 0 || c.centered()) {
    return absl::InvalidArgumentError("optimizer: rho and centered apply to RMSPROP only");
  }
  if (ftrl) {
    if (!c.has_learning_rate_power()) c.set_learning_rate_power(-0.5);
    if (!(c.learning_rate_power() <= 0) || !std::isfinite(c.learning_rate_power())) {
      return absl::InvalidArgumentError(absl::StrCat("optimizer: learning_rate_power ",
                                                     c.learning_rate_power(), " must be <= 0"));
    }
    for (const auto& [field, value] :
         {std::pair<const char*, double>{"l1_regularization_strength",
                                         c.l1_regularization_strength()},
          {"l2_regularization_strength", c.l2_regularization_strength()},
          {"l2_shrinkage_regularization_strength", c.l2_shrinkage_regularization_strength()},
          {"beta", c.beta()}}) {
      if (!(value >= 0) || !std::isfinite(value)) {
        return absl::InvalidArgumentError(
            absl::StrCat("optimizer: ", field, " ", value, " must be finite and >= 0"));
      }
    }
  } else if (c.has_learning_rate_power() || c.l1_regularization_strength() != 0 ||
             c.l2_regularization_strength() != 0 || c.l2_shrinkage_regularization_strength() != 0 ||
             c.beta() != 0) {
    return absl::InvalidArgumentError(
        "optimizer: learning_rate_power, the regularization strengths and beta apply to FTRL "
        "only");
  }
  if (c.lazy_rows() && (kind != K::ADAM || (c.has_weight_decay() && c.weight_decay() > 0))) {
    return absl::InvalidArgumentError(
        "optimizer: lazy_rows (lazy Adam) applies to ADAM without weight decay only (the other "
        "optimizers update rows as their whole update does, or every row)");
  }
  if (kind == K::ADAGRAD || ftrl) {
    if (c.initial_accumulator_value() == 0) c.set_initial_accumulator_value(0.1);
    if (!(c.initial_accumulator_value() > 0) || !std::isfinite(c.initial_accumulator_value())) {
      return absl::InvalidArgumentError(absl::StrCat("optimizer: initial_accumulator_value ",
                                                     c.initial_accumulator_value(),
                                                     " must be finite and > 0"));
    }
  } else if (c.initial_accumulator_value() != 0) {
    return absl::InvalidArgumentError(
        "optimizer: initial_accumulator_value applies to ADAGRAD and FTRL only");
  }
  PSC_RETURN_IF_ERROR(CheckSchedule(c.schedule()));
  for (const auto& [field, value] : {std::pair<const char*, double>{"clipvalue", c.clipvalue()},
                                     {"clipnorm", c.clipnorm()},
                                     {"global_clipnorm", c.global_clipnorm()}}) {
    if (!(value >= 0 && std::isfinite(value))) {
      return absl::InvalidArgumentError(
          absl::StrCat("optimizer: ", field, " ", value, " must be finite and >= 0"));
    }
  }
  if ((c.clipvalue() > 0) + (c.clipnorm() > 0) + (c.global_clipnorm() > 0) > 1) {
    return absl::InvalidArgumentError(
        "optimizer: two of clipvalue, clipnorm and global_clipnorm together (Keras allows one "
        "of them)");
  }
  if (kind == K::ADAMW && !c.has_weight_decay()) c.set_weight_decay(0.004);
  if (c.has_weight_decay() && !(c.weight_decay() >= 0 && std::isfinite(c.weight_decay()))) {
    return absl::InvalidArgumentError(
        absl::StrCat("optimizer: weight_decay ", c.weight_decay(), " must be finite and >= 0"));
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
  if (name == "adamw") return proto::OptimizerConfig::ADAMW;
  if (name == "rmsprop") return proto::OptimizerConfig::RMSPROP;
  if (name == "adagrad") return proto::OptimizerConfig::ADAGRAD;
  if (name == "ftrl") return proto::OptimizerConfig::FTRL;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown optimizer \"", name,
                   "\"; expected sgd, momentum, adam, adamw, rmsprop, adagrad or ftrl"));
}

namespace {

std::string KindText(const proto::OptimizerConfig& c) {
  switch (c.kind()) {
    case proto::OptimizerConfig::ADAM:
    case proto::OptimizerConfig::ADAMW:
      return absl::StrCat(c.kind() == proto::OptimizerConfig::ADAM ? "adam" : "adamw", ", lr ",
                          c.learning_rate(), " (beta_1 ", c.beta_1(), ", beta_2 ", c.beta_2(),
                          ", epsilon ", c.epsilon(), c.lazy_rows() ? ", lazy on tables" : "");
    case proto::OptimizerConfig::RMSPROP:
      return absl::StrCat("rmsprop, lr ", c.learning_rate(), " (rho ", c.rho(),
                          c.momentum() > 0 ? absl::StrCat(", momentum ", c.momentum()) : "",
                          c.centered() ? ", centered" : "", ", epsilon ", c.epsilon());
    case proto::OptimizerConfig::ADAGRAD:
      return absl::StrCat("adagrad, lr ", c.learning_rate(), " (initial_accumulator_value ",
                          c.initial_accumulator_value(), ", epsilon ", c.epsilon());
    case proto::OptimizerConfig::FTRL:
      return absl::StrCat("ftrl, lr ", c.learning_rate(), " (learning_rate_power ",
                          c.learning_rate_power(), ", initial_accumulator_value ",
                          c.initial_accumulator_value(), ", l1 ", c.l1_regularization_strength(),
                          ", l2 ", c.l2_regularization_strength(), ", l2_shrinkage ",
                          c.l2_shrinkage_regularization_strength(), ", beta ", c.beta());
    case proto::OptimizerConfig::MOMENTUM:
      return absl::StrCat("sgd with momentum ", c.momentum(), c.nesterov() ? " (nesterov)" : "",
                          ", lr ", c.learning_rate());
    default:
      return absl::StrCat("sgd, lr ", c.learning_rate());
  }
}

}  // namespace

absl::Status CheckClipnormPlacement(const proto::OptimizerConfig& config,
                                    const proto::Placement& placement) {
  if (config.clipnorm() <= 0) return absl::OkStatus();
  for (const proto::VariablePlacement& v : placement.variables()) {
    if (v.parts_size() > 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the optimizer's clipnorm: the variable ", v.name(), " is split over ", v.parts_size(),
          " parameter servers, and each would clip its part by the part's norm, not Keras's "
          "whole-variable norm; run with fewer servers (--ps=1 splits nothing), or clipvalue"));
    }
  }
  return absl::OkStatus();
}

double LearningRateAt(const proto::OptimizerConfig& c, int64_t iteration) {
  using S = proto::LearningRateSchedule;
  const S& s = c.schedule();
  const double lr = c.learning_rate();
  const double step = static_cast<double>(std::max<int64_t>(iteration, 0));
  switch (s.kind()) {
    case S::EXPONENTIAL_DECAY: {
      double p = step / s.decay_steps();
      if (s.staircase()) p = std::floor(p);
      return lr * std::pow(s.decay_rate(), p);
    }
    case S::PIECEWISE_CONSTANT_DECAY: {
      int i = 0;
      while (i < s.boundaries_size() && step > s.boundaries(i)) ++i;
      return s.values(i);
    }
    case S::COSINE_DECAY: {
      auto decay = [&](double at, double from) {
        const double c = 0.5 * (1.0 + std::cos(M_PI * at / s.decay_steps()));
        return from * ((1.0 - s.alpha()) * c + s.alpha());
      };
      if (!s.has_warmup_target()) return decay(std::min(step, s.decay_steps()), lr);
      const double warmup = static_cast<double>(s.warmup_steps());
      const double at = std::min(step, s.decay_steps() + warmup);
      if (at < warmup) return (s.warmup_target() - lr) * (at / warmup) + lr;
      return decay(at - warmup, s.warmup_target());
    }
    default:
      return lr;
  }
}

std::string ScheduleText(const proto::LearningRateSchedule& s) {
  switch (s.kind()) {
    case proto::LearningRateSchedule::EXPONENTIAL_DECAY:
      return absl::StrCat("exponential_decay (decay_steps ", s.decay_steps(), ", decay_rate ",
                          s.decay_rate(), s.staircase() ? ", staircase" : "", ")");
    case proto::LearningRateSchedule::PIECEWISE_CONSTANT_DECAY:
      return absl::StrCat("piecewise_constant_decay (boundaries [",
                          absl::StrJoin(s.boundaries(), ", "), "], values [",
                          absl::StrJoin(s.values(), ", "), "])");
    case proto::LearningRateSchedule::COSINE_DECAY:
      return absl::StrCat("cosine_decay (decay_steps ", s.decay_steps(), ", alpha ", s.alpha(),
                          s.has_warmup_target() ? absl::StrCat(", warmup to ", s.warmup_target(),
                                                               " over ", s.warmup_steps(), " steps")
                                                : "",
                          ")");
    default:
      return "";
  }
}

std::string OptimizerText(const proto::OptimizerConfig& c) {
  std::string text = KindText(c);
  const bool open =
      c.kind() != proto::OptimizerConfig::SGD && c.kind() != proto::OptimizerConfig::MOMENTUM;
  const bool decay = c.has_weight_decay() && c.weight_decay() > 0;
  if (open) {
    absl::StrAppend(&text, decay ? absl::StrCat(", weight_decay ", c.weight_decay()) : "", ")");
  } else if (decay) {
    absl::StrAppend(&text, " (weight_decay ", c.weight_decay(), ")");
  }
  if (c.clipvalue() > 0) absl::StrAppend(&text, ", clipvalue ", c.clipvalue());
  if (c.clipnorm() > 0) absl::StrAppend(&text, ", clipnorm ", c.clipnorm());
  if (c.global_clipnorm() > 0) absl::StrAppend(&text, ", global_clipnorm ", c.global_clipnorm());
  if (const std::string schedule = ScheduleText(c.schedule()); !schedule.empty()) {
    absl::StrAppend(&text, ", learning rate by ", schedule);
  }
  return text;
}

Optimizer::Optimizer(const proto::OptimizerConfig& config) : config_(config) {
  switch (config.kind()) {
    case proto::OptimizerConfig::MOMENTUM:
      slot_names_ = {"momentum"};
      break;
    case proto::OptimizerConfig::ADAM:
    case proto::OptimizerConfig::ADAMW:
      slot_names_ = {"m", "v"};
      break;
    case proto::OptimizerConfig::RMSPROP:
      slot_names_ = {"velocity"};
      if (config.momentum() > 0) slot_names_.push_back("momentum");
      if (config.centered()) slot_names_.push_back("average_gradient");
      break;
    case proto::OptimizerConfig::ADAGRAD:
      slot_names_ = {"accumulator"};
      break;
    case proto::OptimizerConfig::FTRL:
      slot_names_ = {"accumulator", "linear"};
      break;
    default:
      break;
  }
  slot_initial_values_.assign(slot_names_.size(), 0.0f);
  if (config.kind() == proto::OptimizerConfig::ADAGRAD ||
      config.kind() == proto::OptimizerConfig::FTRL) {
    slot_initial_values_[0] = static_cast<float>(config.initial_accumulator_value());
  }
}

bool Optimizer::keras_slots_per_variable() const {
  return config_.kind() != proto::OptimizerConfig::RMSPROP;
}

void Optimizer::Apply(float* var, const float* grad, size_t n, float* const* slots,
                      int64_t iteration) const {
  const float lr = static_cast<float>(LearningRateAt(config_, iteration));
  // Keras clips first, into a copy (the caller's gradient is const).
  thread_local std::vector<float> clipped;
  if (config_.clipvalue() > 0) {
    const float v = static_cast<float>(config_.clipvalue());
    clipped.assign(grad, grad + n);
    for (float& g : clipped) g = std::min(std::max(g, -v), v);
    grad = clipped.data();
  } else if (config_.clipnorm() > 0) {
    double sum = 0;
    for (size_t i = 0; i < n; ++i) sum += static_cast<double>(grad[i]) * grad[i];
    const float c = static_cast<float>(config_.clipnorm());
    const float norm = static_cast<float>(std::sqrt(sum));
    const float over = std::max(norm, c);
    clipped.resize(n);
    for (size_t i = 0; i < n; ++i) clipped[i] = grad[i] * c / over;
    grad = clipped.data();
  }
  if (config_.weight_decay() > 0) {  // Keras 3: w - w * wd * lr, before the update
    const float decay = static_cast<float>(config_.weight_decay());
    for (size_t i = 0; i < n; ++i) var[i] = var[i] - var[i] * decay * lr;
  }
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
    case proto::OptimizerConfig::RMSPROP: {
      const float rho = static_cast<float>(config_.rho());
      const float one_minus_rho = static_cast<float>(1 - config_.rho());
      const float eps = static_cast<float>(config_.epsilon());
      const float mu = static_cast<float>(config_.momentum());
      float* v = slots[0];
      float* m = mu > 0 ? slots[1] : nullptr;
      float* a = config_.centered() ? slots[mu > 0 ? 2 : 1] : nullptr;
      for (size_t i = 0; i < n; ++i) {
        const float g = grad[i];
        v[i] = rho * v[i] + one_minus_rho * (g * g);
        float d = v[i] + eps;
        if (a != nullptr) {
          a[i] = rho * a[i] + one_minus_rho * g;
          d = v[i] - a[i] * a[i] + eps;
        }
        const float inc = lr * g / std::sqrt(d);
        if (m != nullptr) {
          m[i] = mu * m[i] + inc;
          var[i] -= m[i];
        } else {
          var[i] -= inc;
        }
      }
      return;
    }
    case proto::OptimizerConfig::ADAGRAD: {
      const float eps = static_cast<float>(config_.epsilon());
      float* acc = slots[0];
      for (size_t i = 0; i < n; ++i) {
        const float g = grad[i];
        acc[i] += g * g;
        var[i] -= lr * g / std::sqrt(acc[i] + eps);
      }
      return;
    }
    case proto::OptimizerConfig::FTRL: {
      // Keras's Ftrl.update_step, in float32 as Keras computes it.
      const float power = static_cast<float>(-config_.learning_rate_power());
      const float l1 = static_cast<float>(config_.l1_regularization_strength());
      const float l2 = static_cast<float>(config_.l2_regularization_strength()) +
                       static_cast<float>(config_.beta()) / (2.0f * lr);
      const float shrinkage =
          2.0f * static_cast<float>(config_.l2_shrinkage_regularization_strength());
      float* acc = slots[0];
      float* linear = slots[1];
      for (size_t i = 0; i < n; ++i) {
        const float g = grad[i];
        const float with_shrinkage = g + shrinkage * var[i];
        const float new_acc = acc[i] + g * g;
        const float p_new = std::pow(new_acc, power), p_old = std::pow(acc[i], power);
        linear[i] += with_shrinkage - (p_new - p_old) / lr * var[i];
        const float quadratic = p_new / lr + 2.0f * l2;
        const float clipped = std::min(std::max(linear[i], -l1), l1);
        var[i] = (clipped - linear[i]) / quadratic;
        acc[i] = new_acc;
      }
      return;
    }
    case proto::OptimizerConfig::ADAM:
    case proto::OptimizerConfig::ADAMW: {
      const double t = static_cast<double>(iteration + 1);
      const double b1 = config_.beta_1(), b2 = config_.beta_2();
      const float alpha =
          static_cast<float>(LearningRateAt(config_, iteration) * std::sqrt(1 - std::pow(b2, t)) /
                             (1 - std::pow(b1, t)));
      const float one_minus_b1 = static_cast<float>(1 - b1);
      const float one_minus_b2 = static_cast<float>(1 - b2);
      const float eps = static_cast<float>(config_.epsilon());
      AdamUpdate(grad, n, alpha, one_minus_b1, one_minus_b2, eps, var, slots[0], slots[1]);
      return;
    }
    default:
      return;
  }
}

double ClipByGlobalNorm(double global_clipnorm, const std::vector<bool>& trainable,
                        std::vector<std::vector<float>>* grads) {
  double squares = 0;
  for (size_t v = 0; v < grads->size() && v < trainable.size(); ++v) {
    if (!trainable[v]) continue;
    for (float g : (*grads)[v]) squares += static_cast<double>(g) * g;
  }
  const double norm = std::sqrt(squares);
  if (!(global_clipnorm > 0) || !(norm > global_clipnorm)) return norm;  // NaN: left as it is
  const float scale = static_cast<float>(global_clipnorm / norm);
  for (size_t v = 0; v < grads->size() && v < trainable.size(); ++v) {
    if (!trainable[v]) continue;
    for (float& g : (*grads)[v]) g *= scale;
  }
  return norm;
}

}  // namespace optimizer
}  // namespace psc
