#include "common/keras/keras_archive.h"

#include <fstream>
#include <sstream>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/base/status_macros.h"
#include "common/io/zip_member.h"

namespace psc {
namespace keras {

bool IsModelFile(const std::string& model) {
  return absl::EndsWith(model, ".keras") || absl::EndsWith(model, ".json");
}

absl::StatusOr<KerasArchive> ReadKerasArchive(const std::string& path) {
  PSC_ASSIGN_OR_RETURN(auto members, io::ReadZipFile(path, kMaxWeightsBytes));
  KerasArchive archive;
  bool has_config = false;
  std::vector<std::string> names;
  for (auto& [name, bytes] : members) {
    names.push_back(name);
    if (name == "config.json") {
      if (bytes.size() > kMaxConfigBytes) {
        return absl::InvalidArgumentError(absl::StrCat(path, ": config.json of ", bytes.size(),
                                                       " bytes (at most ", kMaxConfigBytes, ")"));
      }
      archive.config_json = std::move(bytes);
      has_config = true;
    } else if (name == "metadata.json") {
      archive.metadata_json = std::move(bytes);
    } else if (name == "model.weights.h5") {
      archive.weights_h5 = std::move(bytes);
    }
  }
  if (!has_config) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": not a Keras archive: no config.json (it has: ",
                     names.empty() ? "nothing" : absl::StrJoin(names, ", "), ")"));
  }
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

absl::StatusOr<std::string> ReadModelConfig(const std::string& path) {
  if (absl::EndsWith(path, ".keras")) {
    PSC_ASSIGN_OR_RETURN(KerasArchive archive, ReadKerasArchive(path));
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
