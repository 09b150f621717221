// The .keras archive Keras 3's model.save() writes: a zip of config.json
// (the model, as to_json()), metadata.json and model.weights.h5 (the
// variables, weights_h5.h). Its members are read into memory, each bounded
// before and while it inflates (io/zip_member.h): config.json by
// kMaxConfigBytes, metadata.json by kMaxMetadataBytes, and model.weights.h5
// by WeightsH5Limit of the model its config describes. Other members (a
// Keras "assets/" folder) are not read.
#ifndef PSC_COMMON_KERAS_KERAS_ARCHIVE_H_
#define PSC_COMMON_KERAS_KERAS_ARCHIVE_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "common/compute/model.h"

namespace psc {
namespace keras {

struct KerasArchive {
  std::string config_json;
  std::string metadata_json;
  std::string weights_h5;  // empty when the archive has no model.weights.h5
};

// The largest config.json and metadata.json read.
inline constexpr uint64_t kMaxConfigBytes = uint64_t{64} << 20;
inline constexpr uint64_t kMaxMetadataBytes = uint64_t{1} << 20;
// What HDF5 may add to the variables' bytes in a model.weights.h5: its
// superblock, groups, dataset headers and chunk indexes.
inline constexpr uint64_t kWeightsH5OverheadBytes = uint64_t{1} << 20;
inline constexpr uint64_t kWeightsH5OverheadPercent = 1;
// A model.weights.h5 also holds its optimizer's state when the model was
// compiled and trained (Keras, or a pscluster export): up to this many
// slots per variable (Adam: 2; one more for an optimizer pscluster
// refuses, so that its file still reaches the refusal).
inline constexpr uint64_t kWeightsH5OptimizerSlots = 3;

// The most bytes a model.weights.h5 of `model` may hold: its variables'
// float32 bytes, as many again for each of kWeightsH5OptimizerSlots slots,
// + kWeightsH5OverheadBytes + kWeightsH5OverheadPercent % of them.
// INVALID_ARGUMENT if the sum overflows.
absl::StatusOr<uint64_t> WeightsH5Limit(const compute::Model& model);

// The archive at `path`, whose model.weights.h5 must hold `model`'s
// variables (WeightsH5Limit; a larger one is refused before it is
// inflated). NOT_FOUND for a missing file; INVALID_ARGUMENT naming the file
// for a zip without config.json; DATA_LOSS for a corrupt zip or a member
// over its bound (io/zip_member.h).
absl::StatusOr<KerasArchive> ReadKerasArchive(const std::string& path, const compute::Model& model);

// Writes metadata.json, config.json and (when not empty) model.weights.h5,
// atomically (a temporary file and a rename).
absl::Status WriteKerasArchive(const std::string& path, const KerasArchive& archive);
// The same with model.weights.h5 copied from the file `weights_h5_file`
// a piece at a time (archive.weights_h5 is not read): an export whose
// tables are never whole in memory.
absl::Status WriteKerasArchive(const std::string& path, const KerasArchive& archive,
                               const std::string& weights_h5_file);

// A model file's architecture: a .keras archive's config.json (the only
// member read), or a .json file as model.to_json() writes it.
// INVALID_ARGUMENT for another extension.
absl::StatusOr<std::string> ReadModelConfig(const std::string& path);

// Whether `model` names a model file (.keras or .json) rather than a
// built-in model.
bool IsModelFile(const std::string& model);

}  // namespace keras
}  // namespace psc

#endif  // PSC_COMMON_KERAS_KERAS_ARCHIVE_H_
