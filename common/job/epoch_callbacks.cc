#include "common/job/epoch_callbacks.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/base/status_macros.h"

namespace psc {
namespace job {

EpochLogs LogsOf(const EpochRecord& record) {
  EpochLogs logs = {{"loss", record.loss},
                    {"accuracy", record.accuracy},
                    {"val_loss", record.val_loss},
                    {"val_accuracy", record.val_accuracy}};
  for (const auto& [name, value] : record.metrics) logs[name] = value;
  for (const auto& [name, value] : record.val_metrics) logs["val_" + name] = value;
  return logs;
}

absl::StatusOr<Monitor> Monitor::Create(const std::string& monitor, const std::string& mode,
                                        double min_delta, const std::string& flag,
                                        const std::vector<proto::CompiledMetric>& metrics,
                                        bool accuracy) {
  const std::string base =
      monitor.rfind("val_", 0) == 0 ? monitor.substr(4) : monitor;  // Keras's removeprefix
  bool known = base == "loss" || (accuracy && base == "accuracy");
  bool lower_is_better = base == "loss";
  std::string names = accuracy ? "loss, accuracy" : "loss";
  for (const proto::CompiledMetric& m : metrics) {
    absl::StrAppend(&names, ", ", m.name());
    if (m.name() != base) continue;
    known = true;
    lower_is_better = m.kind() == proto::CompiledMetric::MAE ||
                      m.kind() == proto::CompiledMetric::MSE ||
                      m.kind() == proto::CompiledMetric::ROOT_MEAN_SQUARED_ERROR;
  }
  if (!known) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, "_monitor=", monitor, ": expected one of ", names,
                     ", each also with val_ (what pscluster logs each epoch)"));
  }
  if (mode != "auto" && mode != "min" && mode != "max") {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, "_mode=", mode, ": expected auto, min or max"));
  }
  if (!std::isfinite(min_delta)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, "_min_delta=", min_delta, ": must be finite"));
  }
  Monitor m;
  m.name_ = monitor;
  m.maximize_ = mode == "max" || (mode == "auto" && !lower_is_better);
  m.min_delta_ = std::fabs(min_delta);  // Keras takes its absolute value
  return m;
}

bool Monitor::IsImprovement(double value, std::optional<double> reference) const {
  if (!reference.has_value()) return true;
  // Keras: monitor_op(value - min_delta, reference), min_delta negated
  // when minimizing.
  return maximize_ ? value - min_delta_ > *reference : value + min_delta_ < *reference;
}

absl::Status EpochCallbacks::Validate(const proto::Callbacks& spec,
                                      const std::vector<proto::CompiledMetric>& metrics,
                                      bool accuracy) {
  if (!spec.early_stopping_monitor().empty()) {
    PSC_RETURN_IF_ERROR(Monitor::Create(spec.early_stopping_monitor(), spec.early_stopping_mode(),
                                        spec.early_stopping_min_delta(), "early_stopping", metrics,
                                        accuracy)
                            .status());
    if (spec.early_stopping_patience() < 0 || spec.early_stopping_start_from_epoch() < 0) {
      return absl::InvalidArgumentError(
          "--early_stopping_patience and --early_stopping_start_from_epoch must be >= 0");
    }
  } else if (spec.restore_best_weights() || spec.early_stopping_patience() != 0 ||
             spec.has_early_stopping_baseline()) {
    return absl::InvalidArgumentError(
        "--restore_best_weights, --early_stopping_patience and --early_stopping_baseline need "
        "--early_stopping_monitor (e.g. val_loss)");
  }
  if (!spec.reduce_lr_monitor().empty()) {
    PSC_RETURN_IF_ERROR(Monitor::Create(spec.reduce_lr_monitor(), spec.reduce_lr_mode(),
                                        spec.reduce_lr_min_delta(), "reduce_lr", metrics, accuracy)
                            .status());
    if (!(spec.reduce_lr_factor() > 0 && spec.reduce_lr_factor() < 1)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--reduce_lr_factor=", spec.reduce_lr_factor(),
                       ": must be in (0, 1) (Keras's ReduceLROnPlateau refuses a factor >= 1)"));
    }
    if (spec.reduce_lr_patience() < 0 || spec.reduce_lr_cooldown() < 0 ||
        !(spec.reduce_lr_min_lr() >= 0) || !std::isfinite(spec.reduce_lr_min_lr())) {
      return absl::InvalidArgumentError(
          "--reduce_lr_patience, --reduce_lr_cooldown and --reduce_lr_min_lr must be >= 0");
    }
  }
  if (!spec.export_best().empty()) {
    PSC_RETURN_IF_ERROR(
        Monitor::Create(spec.export_monitor(), spec.export_mode(), 0, "export", metrics, accuracy)
            .status());
  }
  return absl::OkStatus();
}

EpochCallbacks::EpochCallbacks(const proto::Callbacks& spec,
                               const std::vector<proto::CompiledMetric>& metrics, bool accuracy)
    : spec_(spec) {
  if (!spec.early_stopping_monitor().empty()) {
    absl::StatusOr<Monitor> m =
        Monitor::Create(spec.early_stopping_monitor(), spec.early_stopping_mode(),
                        spec.early_stopping_min_delta(), "early_stopping", metrics, accuracy);
    if (m.ok()) stopping_ = *m;
  }
  if (!spec.reduce_lr_monitor().empty()) {
    absl::StatusOr<Monitor> m =
        Monitor::Create(spec.reduce_lr_monitor(), spec.reduce_lr_mode(), spec.reduce_lr_min_delta(),
                        "reduce_lr", metrics, accuracy);
    if (m.ok()) reducing_ = *m;
  }
  if (!spec.export_best().empty()) {
    absl::StatusOr<Monitor> m =
        Monitor::Create(spec.export_monitor(), spec.export_mode(), 0, "export", metrics, accuracy);
    if (m.ok()) exporting_ = *m;
  }
}

EpochCallbacks::Verdict EpochCallbacks::OnEpochEnd(int64_t epoch, const EpochLogs& logs,
                                                   double learning_rate) {
  Verdict v;
  if (reducing_.has_value()) {
    // Keras's ReduceLROnPlateau.on_epoch_end.
    const auto it = logs.find(reducing_->name());
    if (it != logs.end()) {
      const double current = it->second;
      if (cooldown_counter_ > 0) {
        --cooldown_counter_;
        reduce_wait_ = 0;
      }
      if (reducing_->IsImprovement(current, reduce_best_)) {
        reduce_best_ = current;
        reduce_wait_ = 0;
      } else if (cooldown_counter_ == 0) {
        ++reduce_wait_;
        if (reduce_wait_ >= spec_.reduce_lr_patience()) {
          // Keras reads the rate back from its float32 variable.
          const double old_lr = static_cast<float>(learning_rate);
          if (old_lr > static_cast<float>(spec_.reduce_lr_min_lr())) {
            v.learning_rate = std::max(old_lr * spec_.reduce_lr_factor(), spec_.reduce_lr_min_lr());
            cooldown_counter_ = spec_.reduce_lr_cooldown();
            reduce_wait_ = 0;
          }
        }
      }
    }
  }
  if (exporting_.has_value()) {
    const auto it = logs.find(exporting_->name());
    if (it != logs.end() && exporting_->IsImprovement(it->second, best_exported_)) {
      best_exported_ = it->second;
      v.export_now = true;
    }
  }
  if (!stopping_.has_value()) return v;
  const auto it = logs.find(stopping_->name());
  if (it == logs.end() || epoch < spec_.early_stopping_start_from_epoch()) return v;
  const double current = it->second;
  if (spec_.restore_best_weights() && !have_best_weights_) {
    // Keras: never set yet, the current weights are the best.
    have_best_weights_ = true;
    best_epoch_ = epoch;
    v.keep_weights = true;
  }
  ++wait_;
  if (stopping_->IsImprovement(current, best_)) {
    best_ = current;
    best_epoch_ = epoch;
    if (spec_.restore_best_weights()) v.keep_weights = true;
    const std::optional<double> baseline =
        spec_.has_early_stopping_baseline()
            ? std::optional<double>(spec_.early_stopping_baseline().value())
            : std::nullopt;
    if (!baseline.has_value() || stopping_->IsImprovement(current, baseline)) wait_ = 0;
    return v;
  }
  if (wait_ >= spec_.early_stopping_patience() && epoch > 0) {
    v.stop = true;
    v.why = absl::StrFormat(
        "early stopping after epoch %d: %s did not improve on %.6g (epoch %d) by more than "
        "min_delta %g for %d epoch(s)",
        epoch + 1, stopping_->name(), best_.value_or(current), best_epoch_ + 1,
        spec_.early_stopping_min_delta(), wait_);
  }
  return v;
}

}  // namespace job
}  // namespace psc
