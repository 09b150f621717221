#include "common/job/job_export.h"

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
                         const compute::Model& model, const std::vector<std::vector<float>>& params,
                         const data::Preprocessing& preprocessing,
                         const proto::OptimizerConfig* optimizer,
                         const keras::OptimizerState* optimizer_state) {
  if (options.keras.empty() && options.weights.empty()) return absl::OkStatus();
  // .weights.h5 alone: the model's own layers (load_weights needs them).
  PSC_ASSIGN_OR_RETURN(std::string h5, keras::WeightsH5Bytes(model, params));
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
  // layer (no variables) where Keras looks for it.
  std::optional<compute::Model> written;
  if (config != config_json) {
    PSC_ASSIGN_OR_RETURN(written, keras::ModelFromKerasConfig(config, "the export"));
    layout = &*written;
  }
  PSC_ASSIGN_OR_RETURN(std::string keras_h5,
                       keras::WeightsH5Bytes(*layout, params, optimizer_state));
  if (!options.weights.empty()) {
    if (absl::Status s = io::LocalFileSystem()->WriteFileAtomically(options.weights, h5); !s.ok()) {
      return base::Prefix(s, absl::StrCat("cannot write ", options.weights));
    }
  }
  if (!options.keras.empty()) {
    keras::KerasArchive archive;
    archive.config_json = config;
    archive.metadata_json =
        nlohmann::json({{"keras_version", "3.0.0"},
                        {"date_saved",
                         absl::FormatTime("%Y-%m-%d@%H:%M:%S", absl::Now(), absl::LocalTimeZone())},
                        {"producer", "pscluster"}})
            .dump();
    archive.weights_h5 = std::move(keras_h5);
    PSC_RETURN_IF_ERROR(keras::WriteKerasArchive(options.keras, archive));
  }
  return absl::OkStatus();
}

}  // namespace job
}  // namespace psc
