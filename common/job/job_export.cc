#include "common/job/job_export.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/base/status_context.h"
#include "common/base/status_macros.h"
#include "common/io/file_system.h"
#include "common/job/compile_config.h"
#include "common/job/input_preprocessing.h"
#include "common/keras/builtin_models.h"
#include "common/keras/keras_archive.h"
#include "common/keras/keras_config.h"
#include "common/keras/weights_h5.h"
#include "nlohmann/json.hpp"

namespace psc {
namespace job {
namespace {

absl::Status CheckPath(const char* flag, const std::string& path, const char* extension) {
  if (path.empty()) return absl::OkStatus();
  if (!absl::EndsWith(path, extension)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, "=", path, ": must end in ", extension, " (Keras requires it)"));
  }
  std::filesystem::path dir = std::filesystem::path(path).parent_path();
  if (dir.empty()) dir = ".";
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, "=", path, ": the directory ", dir.string(), " does not exist"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckExportOptions(const ExportOptions& options) {
  PSC_RETURN_IF_ERROR(CheckPath("export", options.keras, ".keras"));
  return CheckPath("export_weights", options.weights, ".weights.h5");
}

std::string ModelConfigJson(const proto::JobSpec& job) {
  if (!job.model_config().empty()) return job.model_config();
  const char* builtin = keras::BuiltinModelConfig(job.model());
  return builtin == nullptr ? std::string() : std::string(builtin);
}

absl::Status ExportModel(const ExportOptions& options, const std::string& config_json,
                         const compute::Model& model, keras::WeightsSource* source,
                         const data::Preprocessing& preprocessing,
                         const proto::OptimizerConfig* optimizer,
                         const keras::OptimizerState* optimizer_state, int64_t chunk_bytes) {
  if (options.keras.empty() && options.weights.empty()) return absl::OkStatus();
  // The .keras model's config first: an error there writes nothing.
  std::string config = config_json;
  if (optimizer != nullptr) {
    config = WithCompileConfig(config_json, *optimizer, model.output_softmax());
  }
  const compute::Model* layout = &model;
  if (model.input_transform().kind == compute::InputTransform::Kind::kNone &&
      preprocessing.kind != data::Preprocessing::Kind::kNone) {
    PSC_ASSIGN_OR_RETURN(config, WithInputLayer(config, preprocessing));
  }
  // The config as written, read back: its weights file lists a new input
  // layer (no variables) where Keras looks for it; the variables, in the
  // same order, are the source's.
  std::optional<compute::Model> written;
  if (config != config_json) {
    PSC_ASSIGN_OR_RETURN(written, keras::ModelFromKerasConfig(config, "the export"));
    layout = &*written;
  }
  // .weights.h5 alone: the model's own layers (load_weights needs them).
  if (!options.weights.empty()) {
    PSC_RETURN_IF_ERROR(
        keras::WriteWeightsH5(options.weights, model, source, nullptr, chunk_bytes));
  }
  if (options.keras.empty()) return absl::OkStatus();
  const std::string weights_file = absl::StrCat(options.keras, ".weights-", getpid(), ".h5");
  absl::Status status =
      keras::WriteWeightsH5(weights_file, *layout, source, optimizer_state, chunk_bytes);
  if (status.ok()) {
    keras::KerasArchive archive;
    archive.config_json = config;
    archive.metadata_json =
        nlohmann::json({{"keras_version", "3.0.0"},
                        {"date_saved",
                         absl::FormatTime("%Y-%m-%d@%H:%M:%S", absl::Now(), absl::LocalTimeZone())},
                        {"producer", "pscluster"}})
            .dump();
    status = keras::WriteKerasArchive(options.keras, archive, weights_file);
  }
  std::remove(weights_file.c_str());
  return status;
}

absl::Status ExportModel(const ExportOptions& options, const std::string& config_json,
                         const compute::Model& model, const std::vector<std::vector<float>>& params,
                         const data::Preprocessing& preprocessing,
                         const proto::OptimizerConfig* optimizer) {
  const auto& vars = model.variables();
  if (params.size() != vars.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(params.size(), " variables for ", model.name(), ", which has ", vars.size()));
  }
  keras::WholeWeights source(&model, &params);
  return ExportModel(options, config_json, model, &source, preprocessing, optimizer);
}

}  // namespace job
}  // namespace psc
