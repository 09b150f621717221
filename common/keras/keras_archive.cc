#include "common/keras/keras_archive.h"

#include <fstream>
#include <optional>
#include <sstream>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/base/checked_size.h"
#include "common/base/status_macros.h"
#include "common/io/zip_member.h"

namespace psc {
namespace keras {

bool IsModelFile(const std::string& model) {
  return absl::EndsWith(model, ".keras") || absl::EndsWith(model, ".json");
}

namespace {

// config.json and metadata.json of the archive at `path` (and whether it
// has a model.weights.h5): the archive's small members, read first.
absl::StatusOr<KerasArchive> ReadSmallMembers(const std::string& path, bool* has_weights) {
  KerasArchive archive;
  bool has_config = false;
  std::vector<std::string> names;
  PSC_RETURN_IF_ERROR(io::ForEachZipMember(
      path, [&](unzFile z, const unz_file_info64& info, const std::string& name) -> absl::Status {
        names.push_back(name);
        const std::string what = absl::StrCat(path, ": ", name);
        if (name == "config.json") {
          PSC_ASSIGN_OR_RETURN(archive.config_json, io::ReadZipMember(z, info, kMaxConfigBytes,
                                                                      "a config.json's cap", what));
          has_config = true;
        } else if (name == "metadata.json") {
          PSC_ASSIGN_OR_RETURN(
              archive.metadata_json,
              io::ReadZipMember(z, info, kMaxMetadataBytes, "a metadata.json's cap", what));
        } else if (name == "model.weights.h5") {
          *has_weights = true;
        }
        return absl::OkStatus();
      }));
  if (!has_config) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": not a Keras archive: no config.json (it has: ",
                     names.empty() ? "nothing" : absl::StrJoin(names, ", "), ")"));
  }
  return archive;
}

}  // namespace

absl::StatusOr<uint64_t> WeightsH5Limit(const compute::Model& model) {
  uint64_t bytes = 0;
  for (const tensor::VariableShape& v : model.variables()) {
    PSC_ASSIGN_OR_RETURN(const uint64_t b,
                         base::ByteSize(v.shape, sizeof(float), ~uint64_t{0}, v.name));
    const std::optional<uint64_t> sum = base::CheckedAdd(bytes, b);
    if (!sum) return absl::InvalidArgumentError("the model's variables overflow 64 bits");
    bytes = *sum;
  }
  const std::optional<uint64_t> with_slots = base::CheckedMul(bytes, 1 + kWeightsH5OptimizerSlots);
  if (!with_slots) return absl::InvalidArgumentError("the model's variables overflow 64 bits");
  bytes = *with_slots;
  const std::optional<uint64_t> limit =
      base::CheckedAdd(bytes, kWeightsH5OverheadBytes + bytes / 100 * kWeightsH5OverheadPercent);
  if (!limit) return absl::InvalidArgumentError("the model's variables overflow 64 bits");
  return *limit;
}

absl::StatusOr<KerasArchive> ReadKerasArchive(const std::string& path,
                                              const compute::Model& model) {
  bool has_weights = false;
  PSC_ASSIGN_OR_RETURN(KerasArchive archive, ReadSmallMembers(path, &has_weights));
  if (!has_weights) return archive;
  PSC_ASSIGN_OR_RETURN(const uint64_t limit, WeightsH5Limit(model));
  const std::string why = absl::StrCat(
      model.name(), "'s variables and HDF5's overhead: larger weights do not match the config");
  PSC_RETURN_IF_ERROR(io::ForEachZipMember(
      path, [&](unzFile z, const unz_file_info64& info, const std::string& name) -> absl::Status {
        if (name != "model.weights.h5") return absl::OkStatus();
        PSC_ASSIGN_OR_RETURN(archive.weights_h5, io::ReadZipMember(z, info, limit, why,
                                                                   absl::StrCat(path, ": ", name)));
        return absl::OkStatus();
      }));
  return archive;
}

absl::Status WriteKerasArchive(const std::string& path, const KerasArchive& archive) {
  std::vector<io::ZipMemberToWrite> members = {{"metadata.json", &archive.metadata_json},
                                               {"config.json", &archive.config_json}};
  // Stored, as Keras's zipfile writes it.
  if (!archive.weights_h5.empty())
    members.push_back({"model.weights.h5", &archive.weights_h5, false});
  return io::WriteZipFile(path, members);
}

absl::Status WriteKerasArchive(const std::string& path, const KerasArchive& archive,
                               const std::string& weights_h5_file) {
  // Stored, as Keras's zipfile writes it.
  return io::WriteZipFile(path, {{"metadata.json", &archive.metadata_json},
                                 {"config.json", &archive.config_json},
                                 {"model.weights.h5", nullptr, false, weights_h5_file}});
}

absl::StatusOr<std::string> ReadModelConfig(const std::string& path) {
  if (absl::EndsWith(path, ".keras")) {
    bool has_weights = false;
    PSC_ASSIGN_OR_RETURN(KerasArchive archive, ReadSmallMembers(path, &has_weights));
    return std::move(archive.config_json);
  }
  if (!absl::EndsWith(path, ".json")) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": a model file is a .keras archive or a .json config"));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  if (size < 0 || static_cast<uint64_t>(size) > kMaxConfigBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": ", size, " bytes; a model config is at most ", kMaxConfigBytes));
  }
  in.seekg(0);
  std::string text(static_cast<size_t>(size), '\0');
  if (!in.read(text.data(), size)) return absl::DataLossError(absl::StrCat(path, ": read failed"));
  return text;
}

}  // namespace keras
}  // namespace psc
