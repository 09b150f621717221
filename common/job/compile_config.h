// What a Keras archive's compile_config says about training (model.compile():
// the optimizer with its hyperparameters, and the loss), checked against
// what pscluster runs: SGD (with momentum and nesterov), Adam, AdamW,
// RMSprop, Adagrad (each with weight_decay);
// sparse_categorical_crossentropy and categorical_crossentropy (one-hot
// labels are read as class ids), with from_logits matching the model's
// output (logits, or a softmax). Job flags given explicitly override it
// (job_flags.cc).
#ifndef PSC_COMMON_JOB_COMPILE_CONFIG_H_
#define PSC_COMMON_JOB_COMPILE_CONFIG_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/compute/model.h"
#include "proto/job.pb.h"

namespace psc {
namespace job {

struct CompileConfig {
  std::optional<proto::OptimizerConfig> optimizer;  // completed (optimizer.h)
  // The optimizer was a keras.optimizers.LossScaleOptimizer: its
  // initial_scale and dynamic_growth_steps (`optimizer` is its inner one).
  std::optional<proto::LossScaleConfig> loss_scale;
  std::string loss;            // Keras's name, "" when not given
  float label_smoothing = 0;   // CategoricalCrossentropy's
  bool reduction_sum = false;  // reduction="sum"
  float huber_delta = 0;       // Huber's, when the config has one
  // The metrics beyond the accuracy (compiled_metrics.h), in their order.
  std::vector<proto::CompiledMetric> metrics;
};

// The compile_config of `config_json` (the whole config: {"class_name":
// ..., "config": ..., "compile_config": ...}); empty when there is none.
// INVALID_ARGUMENT naming `what` for an optimizer, loss or learning-rate
// schedule we do not run, or a from_logits that contradicts the model.
absl::StatusOr<CompileConfig> ReadCompileConfig(absl::string_view config_json,
                                                const compute::Model& model,
                                                absl::string_view what);

// `config_json` with a compile_config that says what ran: `optimizer` as
// Keras serializes it (SGD with its momentum and nesterov, or Adam with its
// betas and epsilon, at its learning rate), the config's own loss and
// metrics, else sparse_categorical_crossentropy (from_logits unless the
// model ends in a softmax) and ["accuracy"]; other keys kept. So that
// keras.models.load_model compiles the export as the job trained it, and
// its optimizer takes the exported state. The same text when it is not a
// JSON object.
std::string WithCompileConfig(const std::string& config_json,
                              const proto::OptimizerConfig& optimizer, bool output_softmax);

}  // namespace job
}  // namespace psc

#endif  // PSC_COMMON_JOB_COMPILE_CONFIG_H_
