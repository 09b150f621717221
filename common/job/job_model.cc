#include "common/job/job_model.h"

#include <algorithm>
#include <map>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"
#include "common/data/numpy_file.h"
#include "common/keras/builtin_models.h"
#include "common/keras/dtype_policy.h"
#include "common/keras/keras_archive.h"
#include "common/keras/keras_config.h"
#include "common/keras/weights_h5.h"

namespace psc {
namespace job {

absl::StatusOr<compute::Model> ModelForJob(const proto::JobSpec& job) {
  if (job.dtype_policy().empty()) {
    if (job.model_config().empty()) return keras::BuiltinModel(job.model());
    return keras::ModelFromKerasConfig(job.model_config(), job.model());
  }
  std::string config = job.model_config();
  if (config.empty()) {
    const char* builtin = keras::BuiltinModelConfig(job.model());
    if (builtin == nullptr) return keras::BuiltinModel(job.model()).status();  // its message
    config = builtin;
  }
  PSC_ASSIGN_OR_RETURN(config, keras::WithDtypePolicy(config, job.dtype_policy()));
  return keras::ModelFromKerasConfig(config, job.model());
}

absl::StatusOr<std::vector<std::vector<float>>> InitialParameters(const proto::JobSpec& job,
                                                                  const compute::Model& model) {
  if (job.initial_weights().empty()) return model.Initialize(job.seed());
  absl::StatusOr<keras::KerasArchive> archive =
      keras::ReadKerasArchive(job.initial_weights(), model);
  // The user's file, named by a flag: whatever is wrong with it is bad input
  // (INVALID_ARGUMENT, exit 2), as a bad flag value is.
  if (!archive.ok()) return absl::InvalidArgumentError(archive.status().message());
  return keras::ReadWeightsH5(archive->weights_h5, model,
                              absl::StrCat(job.initial_weights(), ": model.weights.h5"));
}

absl::Status SetModel(const std::string& model, proto::JobSpec* job,
                      const keras::InputDataShape& data) {
  job->set_model(model);
  job->clear_model_config();
  job->clear_initial_weights();
  if (!keras::IsModelFile(model)) {
    if (absl::Status s = ModelForJob(*job).status(); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--model=", model, ": ", s.message()));
    }
    return absl::OkStatus();
  }
  // From here, the user's model file: whatever is wrong with it is bad input
  // (INVALID_ARGUMENT, exit 2), as a bad flag value is.
  absl::StatusOr<std::string> config = keras::ReadModelConfig(model);
  if (!config.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--model=", config.status().message()));
  }
  config = keras::FixOpenInputDims(*config, model, data);
  if (!config.ok()) return absl::InvalidArgumentError(config.status().message());
  job->set_model_config(*std::move(config));
  absl::StatusOr<compute::Model> built = ModelForJob(*job);  // with its --dtype_policy
  if (!built.ok()) {
    job->clear_model_config();
    return absl::InvalidArgumentError(built.status().message());
  }
  if (absl::EndsWith(model, ".keras")) {
    absl::StatusOr<keras::KerasArchive> archive = keras::ReadKerasArchive(model, *built);
    if (!archive.ok()) return absl::InvalidArgumentError(archive.status().message());
    if (!archive->weights_h5.empty()) {
      // Checked now, so that a mismatch is a bad flag, not a failed job.
      PSC_RETURN_IF_ERROR(keras::ReadWeightsH5(archive->weights_h5, *built,
                                               absl::StrCat(model, ": model.weights.h5"))
                              .status());
      job->set_initial_weights(model);
    }
  }
  return absl::OkStatus();
}

keras::InputDataShape NumpyInputShapes(const std::string& path, const std::string& prefix) {
  return [path, prefix](const std::string& name, bool only) -> absl::StatusOr<compute::Shape> {
    if (path.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the model's input \"", name,
          "\" has a None dimension, which pscluster fixes from the data: give --data=FILE.npz "
          "(the built-in Fashion-MNIST fixes none)"));
    }
    // The array's header alone: its elements are not read (or inflated).
    std::vector<int64_t> shape;
    const std::string packed = absl::StrCat(prefix, "/", name);
    if (absl::EndsWith(path, ".npy")) {
      absl::StatusOr<data::NumpyArray> array = data::ReadNpyFile(path);  // mapped
      if (!array.ok()) return absl::InvalidArgumentError(array.status().message());
      shape = array->header().shape;
    } else {
      absl::StatusOr<std::map<std::string, data::NpyHeader>> headers = data::ReadNpzHeaders(path);
      if (!headers.ok()) return absl::InvalidArgumentError(headers.status().message());
      auto it = headers->find(packed);
      if (it == headers->end() && only) it = headers->find(prefix);
      if (it == headers->end()) {
        return absl::InvalidArgumentError(absl::StrCat(
            path, " has no array '", packed, "'", only ? absl::StrCat(" or '", prefix, "'") : "",
            " to fix the None dimension of the model's input \"", name, "\" from"));
      }
      shape = it->second.shape;
    }
    if (shape.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": '", prefix, "' is a scalar, not an array of examples"));
    }
    return compute::Shape(shape.begin() + 1, shape.end());
  };
}

bool TablesTravelByRows(const proto::JobSpec& job, const compute::Model& model) {
  const std::vector<bool> tables = model.table_variables();
  return std::find(tables.begin(), tables.end(), true) != tables.end() &&
         job.strategy() != proto::MULTI_WORKER_MIRRORED && !job.push().overlap() &&
         !job.push().dense_embeddings();
}

absl::Status CheckRowTableOptions(const proto::JobSpec& job, const compute::Model& model) {
  if (TablesTravelByRows(job, model) && job.callbacks().restore_best_weights()) {
    return absl::InvalidArgumentError(
        "--restore_best_weights keeps the best epoch's weights in the chief, and this model's "
        "embedding tables are trained by rows on the servers and never held whole there; drop "
        "the flag, or give --dense_embeddings");
  }
  return absl::OkStatus();
}

compute::CpuBackendOptions CpuOptionsForJob(const proto::JobSpec& job, int threads) {
  compute::CpuBackendOptions options;
  options.threads = threads;
  options.conv =
      compute::ParseConvAlgorithm(job.conv_algorithm()).value_or(compute::ConvAlgorithm::kAuto);
  return options;
}

}  // namespace job
}  // namespace psc
