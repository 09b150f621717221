// The trained model back in Keras: a .keras archive that
// keras.models.load_model() opens (the job's Keras config, and the
// variables in model.weights.h5), and a .weights.h5 file for
// model.load_weights(). Written by the chief and worker --standalone at the
// end of a job (--export, --export_weights), and by `pscluster export` from
// any checkpoint.
#ifndef PSC_COMMON_JOB_JOB_EXPORT_H_
#define PSC_COMMON_JOB_JOB_EXPORT_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/compute/model.h"
#include "common/data/numpy_images.h"
#include "common/keras/weights_h5.h"
#include "proto/job.pb.h"

namespace psc {
namespace job {

struct ExportOptions {
  std::string keras;    // PATH.keras, or ""
  std::string weights;  // PATH.weights.h5, or ""
};

// The extensions Keras requires (.keras, .weights.h5) and a directory that
// exists. INVALID_ARGUMENT naming the flag (--export, --export_weights).
// job_flags.h's ExportOptionsFromFlags reads the flags.
absl::Status CheckExportOptions(const ExportOptions& options);

// The Keras config JSON of the job's model: the file's, or the built-in
// model's (models/*.json).
std::string ModelConfigJson(const proto::JobSpec& job);

// With `optimizer` (what ran), the .keras model's compile_config says it
// (WithCompileConfig); with `optimizer_state` too, its model.weights.h5
// holds the state in Keras's layout, so that Keras's fit continues where
// the job stopped.
// Writes what `options` names from `params` (model.variables() order),
// each file atomically. Errors name the file. `preprocessing`, what the
// job read its examples through, is written into the .keras model as a
// Rescaling or Normalization layer at its input (input_preprocessing.h)
// unless the model has its own, so that Keras's predict on raw inputs is
// what was trained.
absl::Status ExportModel(const ExportOptions& options, const std::string& config_json,
                         const compute::Model& model, const std::vector<std::vector<float>>& params,
                         const data::Preprocessing& preprocessing = {},
                         const proto::OptimizerConfig* optimizer = nullptr,
                         const keras::OptimizerState* optimizer_state = nullptr);

}  // namespace job
}  // namespace psc

#endif  // PSC_COMMON_JOB_JOB_EXPORT_H_
