// The trained model back in Keras: a .keras archive that
// keras.models.load_model() opens (the job's Keras config, and the
// variables in model.weights.h5), and a .weights.h5 file for
// model.load_weights(). Written by the chief and worker --standalone at the
// end of a job (--export, --export_weights), and by `pscluster export` from
// any checkpoint.
#ifndef PSC_COMMON_JOB_JOB_EXPORT_H_
#define PSC_COMMON_JOB_JOB_EXPORT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/compute/model.h"
#include "common/data/numpy_images.h"
#include "common/keras/weights_source.h"
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

// Writes what `options` names from `source` (values by row ranges, so a
// table is never whole here), each file atomically; errors name the file.
// With `optimizer` (what ran), the .keras model's compile_config says it
// (WithCompileConfig); with `optimizer_state` too, its model.weights.h5
// holds the state in Keras's layout, so that Keras's fit continues where
// the job stopped. `preprocessing`, what the job read its examples
// through, is written into the .keras model as a Rescaling or
// Normalization layer at its input (input_preprocessing.h) unless the
// model has its own, so that Keras's predict on raw inputs is what was
// trained. The .keras archive's model.weights.h5 is written to a file
// beside it first (keras::WriteWeightsH5, `chunk_bytes` at a time) and
// copied into the archive in pieces; that file is removed.
absl::Status ExportModel(const ExportOptions& options, const std::string& config_json,
                         const compute::Model& model, keras::WeightsSource* source,
                         const data::Preprocessing& preprocessing = {},
                         const proto::OptimizerConfig* optimizer = nullptr,
                         const keras::OptimizerState* optimizer_state = nullptr,
                         int64_t chunk_bytes = int64_t{64} << 20);
// The same from `params`, whole in memory (model.variables() order),
// without the optimizer's state.
absl::Status ExportModel(const ExportOptions& options, const std::string& config_json,
                         const compute::Model& model, const std::vector<std::vector<float>>& params,
                         const data::Preprocessing& preprocessing = {},
                         const proto::OptimizerConfig* optimizer = nullptr);

}  // namespace job
}  // namespace psc

#endif  // PSC_COMMON_JOB_JOB_EXPORT_H_
