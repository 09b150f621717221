// Keras's epoch-end callbacks as job flags, with Keras 3.15's semantics
// (keras/src/callbacks/{monitor_callback,early_stopping,model_checkpoint}.py):
//  - EarlyStopping(monitor, min_delta, patience, mode, baseline,
//    restore_best_weights, start_from_epoch): --early_stopping_*;
//  - ModelCheckpoint(FILE.keras, save_best_only=True, monitor, mode):
//    --export_best=FILE.keras, --export_monitor, --export_mode;
//  - ReduceLROnPlateau(monitor, factor, patience, mode, min_delta, cooldown,
//    min_lr): --reduce_lr_*.
// The chief (and worker --standalone) calls OnEpochEnd with each epoch's
// logs; the verdict says whether to stop, and whether the weights of this
// epoch are to be kept (restore_best_weights) or exported (the best so far).
// Pure; thread-compatible.
#ifndef PSC_COMMON_JOB_EPOCH_CALLBACKS_H_
#define PSC_COMMON_JOB_EPOCH_CALLBACKS_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/job/job_result.h"
#include "proto/job.pb.h"

namespace psc {
namespace job {

// Keras's MonitorCallback: the direction (mode "min", "max", or "auto":
// min for a loss, max for an accuracy) and min_delta.
class Monitor {
 public:
  // INVALID_ARGUMENT naming `flag` for a monitor other than loss, accuracy,
  // a compiled metric of `metrics` (compiled_metrics.h), each with or
  // without val_; a mode other than auto, min, max, or a non-finite
  // min_delta. auto, as Keras's: min for the loss, mae and mse, max for the
  // others. Without `accuracy` (a regression) accuracy is not a monitor.
  static absl::StatusOr<Monitor> Create(const std::string& monitor, const std::string& mode,
                                        double min_delta, const std::string& flag,
                                        const std::vector<proto::CompiledMetric>& metrics = {},
                                        bool accuracy = true);

  const std::string& name() const { return name_; }
  // Keras's _is_improvement: value beats reference by more than min_delta
  // in the monitor's direction; always true without a reference.
  bool IsImprovement(double value, std::optional<double> reference) const;

 private:
  std::string name_;
  bool maximize_ = false;
  double min_delta_ = 0;
};

// An epoch's logs as Keras names them: loss, accuracy, val_loss,
// val_accuracy.
using EpochLogs = std::map<std::string, double>;

// An epoch's logs as Keras's callbacks get them: loss, accuracy, the
// compiled metrics, and each with val_.
EpochLogs LogsOf(const EpochRecord& record);

class EpochCallbacks {
 public:
  // From job.callbacks() and job.metrics() (validated by Validate).
  // `accuracy`: whether the job reports one (not a regression).
  explicit EpochCallbacks(const proto::Callbacks& spec,
                          const std::vector<proto::CompiledMetric>& metrics = {},
                          bool accuracy = true);

  // The spec's flags checked: INVALID_ARGUMENT naming the flag.
  static absl::Status Validate(const proto::Callbacks& spec,
                               const std::vector<proto::CompiledMetric>& metrics = {},
                               bool accuracy = true);

  struct Verdict {
    bool stop = false;          // early stopping: end training after this epoch
    bool keep_weights = false;  // restore_best_weights: these are the best so far
    bool export_now = false;    // export_best: export these weights there now
    std::string why;            // when stop: what the result file records
    // ReduceLROnPlateau: the learning rate from the next epoch on.
    std::optional<double> learning_rate;
  };
  // `epoch` 0-based, as Keras's on_epoch_end; `learning_rate` the one the
  // epoch trained at.
  Verdict OnEpochEnd(int64_t epoch, const EpochLogs& logs, double learning_rate = 0);
  bool reduces_learning_rate() const { return reducing_.has_value(); }

  bool restore_best_weights() const { return spec_.restore_best_weights(); }
  const std::string& export_best() const { return spec_.export_best(); }
  // The epoch (0-based) whose weights are kept, or -1.
  int64_t best_epoch() const { return best_epoch_; }

 private:
  proto::Callbacks spec_;
  std::optional<Monitor> stopping_, exporting_;
  // EarlyStopping's state.
  int64_t wait_ = 0;
  std::optional<double> best_;
  int64_t best_epoch_ = -1;
  bool have_best_weights_ = false;
  // ModelCheckpoint's.
  std::optional<double> best_exported_;
  // ReduceLROnPlateau's.
  std::optional<Monitor> reducing_;
  std::optional<double> reduce_best_;
  int64_t reduce_wait_ = 0;
  int64_t cooldown_counter_ = 0;
};

}  // namespace job
}  // namespace psc

#endif  // PSC_COMMON_JOB_EPOCH_CALLBACKS_H_
