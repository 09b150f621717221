// The .keras archive Keras 3's model.save() writes: a zip of config.json
// (the model, as to_json()), metadata.json and model.weights.h5 (the
// variables, weights_h5.h). Read whole into memory: configs are small, and
// the weights are copied into the model's variables anyway.
#ifndef PSC_COMMON_KERAS_KERAS_ARCHIVE_H_
#define PSC_COMMON_KERAS_KERAS_ARCHIVE_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace psc {
namespace keras {

struct KerasArchive {
  std::string config_json;
  std::string metadata_json;
  std::string weights_h5;  // empty when the archive has no model.weights.h5
};

// The largest config.json and model.weights.h5 read.
inline constexpr uint64_t kMaxConfigBytes = uint64_t{64} << 20;
inline constexpr uint64_t kMaxWeightsBytes = uint64_t{16} << 30;

// NOT_FOUND for a missing file; INVALID_ARGUMENT naming the file for a zip
// without config.json, or with members over the bounds; DATA_LOSS for a
// corrupt zip (io/zip_member.h).
absl::StatusOr<KerasArchive> ReadKerasArchive(const std::string& path);

// Writes metadata.json, config.json and (when not empty) model.weights.h5,
// atomically (a temporary file and a rename).
absl::Status WriteKerasArchive(const std::string& path, const KerasArchive& archive);

// A model file's architecture: a .keras archive's config.json, or a .json
// file as model.to_json() writes it. INVALID_ARGUMENT for another extension.
absl::StatusOr<std::string> ReadModelConfig(const std::string& path);

// Whether `model` names a model file (.keras or .json) rather than a
// built-in model.
bool IsModelFile(const std::string& model);

}  // namespace keras
}  // namespace psc

#endif  // PSC_COMMON_KERAS_KERAS_ARCHIVE_H_
