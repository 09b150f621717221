#include "common/job/epoch_callbacks.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/base/status_macros.h"

namespace psc {
namespace job {

absl::StatusOr<Monitor> Monitor::Create(const std::string& monitor, const std::string& mode,
                                        double min_delta, const std::string& flag) {
  if (monitor != "loss" && monitor != "accuracy" && monitor != "val_loss" &&
      monitor != "val_accuracy") {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, "_monitor=", monitor,
                     ": expected loss, accuracy, val_loss or val_accuracy (what pscluster logs "
                     "each epoch)"));
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
  const bool is_loss = monitor == "loss" || monitor == "val_loss";
  m.maximize_ = mode == "max" || (mode == "auto" && !is_loss);
  m.min_delta_ = std::fabs(min_delta);  // Keras takes its absolute value
  return m;
}

bool Monitor::IsImprovement(double value, std::optional<double> reference) const {
  if (!reference.has_value()) return true;
  // Keras: monitor_op(value - min_delta, reference), min_delta negated
  // when minimizing.
  return maximize_ ? value - min_delta_ > *reference : value + min_delta_ < *reference;
}

absl::Status EpochCallbacks::Validate(const proto::Callbacks& spec) {
  if (!spec.early_stopping_monitor().empty()) {
    PSC_RETURN_IF_ERROR(Monitor::Create(spec.early_stopping_monitor(), spec.early_stopping_mode(),
                                        spec.early_stopping_min_delta(), "early_stopping")
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
  if (!spec.export_best().empty()) {
    PSC_RETURN_IF_ERROR(
        Monitor::Create(spec.export_monitor(), spec.export_mode(), 0, "export").status());
  }
  return absl::OkStatus();
}

EpochCallbacks::EpochCallbacks(const proto::Callbacks& spec) : spec_(spec) {
  if (!spec.early_stopping_monitor().empty()) {
    absl::StatusOr<Monitor> m = Monitor::Create(spec.early_stopping_monitor(),
                                                spec.early_stopping_mode(),
                                                spec.early_stopping_min_delta(), "early_stopping");
    if (m.ok()) stopping_ = *m;
  }
  if (!spec.export_best().empty()) {
    absl::StatusOr<Monitor> m = Monitor::Create(spec.export_monitor(), spec.export_mode(), 0, "export");
    if (m.ok()) exporting_ = *m;
  }
}

EpochCallbacks::Verdict EpochCallbacks::OnEpochEnd(int64_t epoch, const EpochLogs& logs) {
  Verdict v;
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
