// The model a job trains and its first variables: a built-in model
// (job.model(): seed_cnn, mlp) or the Keras config the job carries
// (job.model_config(), from --model=FILE.keras or FILE.json); the initial
// variables from the .keras archive's model.weights.h5 when the job names
// one (job.initial_weights()), else from the config's initializers and the
// seed. The one place every task builds its model.
#ifndef PSC_COMMON_JOB_JOB_MODEL_H_
#define PSC_COMMON_JOB_JOB_MODEL_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/compute/cpu_backend.h"
#include "common/compute/model.h"
#include "common/keras/input_dims.h"
#include "proto/job.pb.h"

namespace psc {
namespace job {

// The job's model: its config (or the built-in one), with every layer's
// dtype policy replaced by the job's dtype_policy where it has one.
// INVALID_ARGUMENT (keras_config.h's messages) for a config the backends do
// not run, or an unknown built-in name.
absl::StatusOr<compute::Model> ModelForJob(const proto::JobSpec& job);

// The variables the job starts from, in model.variables() order.
// INVALID_ARGUMENT when the archive cannot be read or its weights do not
// match the model (weights_h5.h).
absl::StatusOr<std::vector<std::vector<float>>> InitialParameters(const proto::JobSpec& job,
                                                                  const compute::Model& model);

// --model's value into the job: a built-in name as it is, or a .keras /
// .json file read, checked and carried as model_config (and, for a .keras
// archive with weights, initial_weights), its inputs' None dimensions fixed
// from `data` (input_dims.h; null: the job has no data to fix them from),
// checked under the job's dtype_policy (set it first). INVALID_ARGUMENT
// naming the flag.
absl::Status SetModel(const std::string& model, proto::JobSpec* job,
                      const keras::InputDataShape& data = nullptr);

// The example shapes of a job's (or `pscluster predict`'s) data, as
// FixOpenInputDims asks for them: `path`'s array `prefix` (a .npy: its one
// array), or for a model of several inputs "<prefix>/<input name>"
// (packed_inputs.h), its shape past the examples' axis. An empty `path`
// (Fashion-MNIST's IDX files) fixes nothing: INVALID_ARGUMENT saying to
// give --data. Every error is INVALID_ARGUMENT naming the file and array.
keras::InputDataShape NumpyInputShapes(const std::string& path, const std::string& prefix);

// Whether the model's embedding tables travel by rows (issue 38): the
// model has one, the strategy is parameter_server and neither
// --push_overlap nor --dense_embeddings is given. Then no process but the
// servers holds a whole table.
bool TablesTravelByRows(const proto::JobSpec& job, const compute::Model& model);

// What such a job cannot do: --restore_best_weights (the chief would keep
// the best epoch's tables whole). INVALID_ARGUMENT naming the flag; OK for
// other jobs.
absl::Status CheckRowTableOptions(const proto::JobSpec& job, const compute::Model& model);

// The CPU backend options of the job's replicas and evaluation: `threads`
// and its --conv_algorithm (auto when empty or unknown: the job's flags
// were checked where it was made).
compute::CpuBackendOptions CpuOptionsForJob(const proto::JobSpec& job, int threads);

}  // namespace job
}  // namespace psc

#endif  // PSC_COMMON_JOB_JOB_MODEL_H_
