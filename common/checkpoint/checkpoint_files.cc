#include "common/checkpoint/checkpoint_files.h"

#include <zlib.h>

#include <algorithm>
#include <cstddef>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "common/base/status_macros.h"
#include "nlohmann/json.hpp"

namespace psc {
namespace checkpoint {
namespace {

namespace fs = std::filesystem;

constexpr int kIndexFormat = 1;
// An index is a few hundred bytes; anything much larger is not one of ours.
constexpr uint64_t kMaxIndexBytes = 1 << 20;
constexpr absl::string_view kStepDirPrefix = "ckpt-";
constexpr absl::string_view kDataSuffix = ".data";
constexpr absl::string_view kIndexSuffix = ".index";
constexpr absl::string_view kTempInfix = ".tmp.";

using io::JoinPath;

io::FileSystem* OrLocal(io::FileSystem* fs) { return fs != nullptr ? fs : io::LocalFileSystem(); }

// "shard-<i>-of-<n>".
std::string ShardStem(int shard, int num_shards) {
  return absl::StrCat("shard-", shard, "-of-", num_shards);
}

absl::Status ValidateShard(const std::string& root, int shard, int num_shards) {
  if (root.empty()) return absl::InvalidArgumentError("checkpoint root is empty");
  if (num_shards < 1) {
    return absl::InvalidArgumentError(absl::StrCat("num_shards must be >= 1, got ", num_shards));
  }
  if (shard < 0 || shard >= num_shards) {
    return absl::InvalidArgumentError(
        absl::StrCat("shard ", shard, " is outside [0, ", num_shards, ")"));
  }
  return absl::OkStatus();
}

// Parses a non-negative decimal integer written canonically (no sign, no
// leading zeros, no spaces), so that parsing and printing round-trip.
bool ParseCanonicalInt64(absl::string_view text, int64_t* out) {
  if (text.empty() || (text.size() > 1 && text[0] == '0')) return false;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
  }
  return absl::SimpleAtoi(text, out);
}

uint32_t Crc32(absl::string_view data) {
  uLong crc = crc32(0L, Z_NULL, 0);
  const auto* p = reinterpret_cast<const Bytef*>(data.data());
  size_t left = data.size();
  while (left > 0) {
    const uInt n = static_cast<uInt>(std::min<size_t>(left, size_t{1} << 30));
    crc = crc32(crc, p, n);
    p += n;
    left -= n;
  }
  return static_cast<uint32_t>(crc);
}

// Whether `path` exists (of any type); INTERNAL if that cannot be told.
absl::StatusOr<bool> PathExists(io::FileSystem* fs, const std::string& path) {
  auto type = fs->Type(path);
  if (!type.ok()) return absl::InternalError(type.status().message());
  return *type != io::FileType::kMissing;
}

// mkdir -p that tolerates concurrent creators (a new directory's parent is
// fsync'ed by the file system). Any failure is INTERNAL.
absl::Status MakeStepDir(io::FileSystem* fs, const std::string& dir) {
  absl::Status s = fs->MakeDirs(dir);
  if (s.ok()) return s;
  return absl::InternalError(s.message());
}

absl::StatusOr<std::string> BuildIndex(int64_t step, int shard, int num_shards,
                                       const std::string& data_name, absl::string_view data) {
  try {
    nlohmann::ordered_json file;
    file["name"] = data_name;
    file["bytes"] = static_cast<uint64_t>(data.size());
    file["crc32"] = Crc32(data);
    nlohmann::ordered_json index;
    index["format"] = kIndexFormat;
    index["step"] = step;
    index["shard"] = shard;
    index["num_shards"] = num_shards;
    index["files"] = nlohmann::ordered_json::array();
    index["files"].push_back(std::move(file));
    return index.dump() + "\n";
  } catch (const nlohmann::json::exception& e) {
    return absl::InternalError(absl::StrCat("build checkpoint index: ", e.what()));
  }
}

// The names of the entries of `dir`. A missing directory has none; any
// failure is INTERNAL naming `what` and the directory.
absl::StatusOr<std::vector<std::string>> ListNames(io::FileSystem* fs, const std::string& dir,
                                                   const char* what) {
  auto names = fs->ListDir(dir);
  if (!names.ok()) {
    return absl::InternalError(absl::StrCat(what, ": ", names.status().message()));
  }
  return *std::move(names);
}

// Steps of all "ckpt-<step>" directories under `root`, ascending. A missing
// root gives an empty list.
absl::StatusOr<std::vector<int64_t>> ListStepDirs(io::FileSystem* fs, const std::string& root) {
  PSC_ASSIGN_OR_RETURN(std::vector<std::string> names, ListNames(fs, root, "checkpoint root"));
  std::vector<int64_t> steps;
  for (const std::string& name : names) {
    absl::string_view rest = name;
    int64_t step = 0;
    if (!absl::ConsumePrefix(&rest, kStepDirPrefix) || !ParseCanonicalInt64(rest, &step)) continue;
    auto type = fs->Type(JoinPath(root, name));
    if (!type.ok() || *type != io::FileType::kDirectory) continue;
    steps.push_back(step);
  }
  std::sort(steps.begin(), steps.end());
  return steps;
}

// The shard counts n for which `dir` holds the .index of every shard
// "shard-<i>-of-<n>", i in [0, n), ascending. Names that do not parse
// canonically (or with i >= n) are ignored. A missing directory gives none.
absl::StatusOr<std::vector<int>> CompleteShardCounts(io::FileSystem* fs, const std::string& dir) {
  PSC_ASSIGN_OR_RETURN(std::vector<std::string> names, ListNames(fs, dir, "checkpoint directory"));
  std::map<int64_t, std::set<int64_t>> indexes;  // n -> shard indexes with an .index
  for (const std::string& name : names) {
    absl::string_view rest = name;
    if (!absl::ConsumePrefix(&rest, "shard-") || !absl::ConsumeSuffix(&rest, kIndexSuffix)) {
      continue;
    }
    const size_t of = rest.find("-of-");
    if (of == absl::string_view::npos) continue;
    int64_t shard = 0, count = 0;
    if (!ParseCanonicalInt64(rest.substr(0, of), &shard) ||
        !ParseCanonicalInt64(rest.substr(of + 4), &count) || shard >= count ||
        count > std::numeric_limits<int>::max()) {
      continue;
    }
    indexes[count].insert(shard);
  }
  std::vector<int> complete;
  for (const auto& [count, shards] : indexes) {
    if (static_cast<int64_t>(shards.size()) == count) complete.push_back(static_cast<int>(count));
  }
  return complete;
}

// Shard counts other than `num_shards` for which `dir` holds a .data or .index
// file of shard index `shard`, ascending. A missing directory gives none.
absl::StatusOr<std::vector<int>> OtherShardCounts(io::FileSystem* fs, const std::string& dir,
                                                  int shard, int num_shards) {
  PSC_ASSIGN_OR_RETURN(std::vector<std::string> names, ListNames(fs, dir, "checkpoint directory"));
  std::set<int> counts;
  const std::string prefix = absl::StrCat("shard-", shard, "-of-");
  for (const std::string& name : names) {
    absl::string_view rest = name;
    if (!absl::ConsumePrefix(&rest, prefix)) continue;
    if (!absl::ConsumeSuffix(&rest, kDataSuffix) && !absl::ConsumeSuffix(&rest, kIndexSuffix)) {
      continue;
    }
    int64_t count = 0;
    if (!ParseCanonicalInt64(rest, &count) || count <= shard ||
        count > std::numeric_limits<int>::max() || count == num_shards) {
      continue;
    }
    counts.insert(static_cast<int>(count));
  }
  return std::vector<int>(counts.begin(), counts.end());
}

absl::Status ShardCountMismatch(const std::string& dir, int shard, int num_shards,
                                const std::vector<int>& counts) {
  return absl::FailedPreconditionError(
      absl::StrCat("checkpoint ", dir, " was written by ", absl::StrJoin(counts, " or "),
                   " shards; this cluster has ", num_shards, " (no ", ShardStem(shard, num_shards),
                   " files there)"));
}

// Reads the whole index file. NOT_FOUND if it vanished; DATA_LOSS if it cannot
// be read or is implausibly large.
absl::StatusOr<std::string> ReadIndexFile(io::FileSystem* fs, const std::string& path) {
  auto size = fs->FileSize(path);
  if (absl::IsNotFound(size.status())) {
    return absl::NotFoundError(absl::StrCat(path, " does not exist"));
  }
  if (!size.ok()) {
    return absl::DataLossError(
        absl::StrCat("checkpoint index ", path, " is unreadable: ", size.status().message()));
  }
  if (*size > kMaxIndexBytes) {
    return absl::DataLossError(
        absl::StrCat("checkpoint index ", path, " is too large (", *size, " bytes)"));
  }
  auto text = fs->ReadFile(path);
  if (absl::IsNotFound(text.status())) {
    return absl::NotFoundError(absl::StrCat(path, " does not exist"));
  }
  if (!text.ok()) {
    return absl::DataLossError(
        absl::StrCat("checkpoint index ", path, " is unreadable: ", text.status().message()));
  }
  return text;
}

// Reads an integer field that fits int64_t; false if missing or of another type.
bool GetInt64(const nlohmann::json& object, const char* key, int64_t* out) {
  const auto it = object.find(key);
  if (it == object.end()) return false;
  if (it->is_number_unsigned()) {
    const uint64_t u = it->get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return false;
    *out = static_cast<int64_t>(u);
    return true;
  }
  if (it->is_number_integer()) {
    *out = it->get<int64_t>();
    return true;
  }
  return false;
}

}  // namespace

absl::StatusOr<IndexEntry> ParseIndex(const std::string& path, const std::string& text,
                                      int64_t step, int shard, int num_shards,
                                      const std::string& data_name) {
  auto bad = [&path](absl::string_view why) {
    return absl::DataLossError(absl::StrCat("checkpoint index ", path, " ", why));
  };
  try {
    const nlohmann::json index = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (index.is_discarded()) return bad("is not valid JSON");
    if (!index.is_object()) return bad("is not a JSON object");
    int64_t format = 0, index_step = 0, index_shard = 0, index_num_shards = 0;
    if (!GetInt64(index, "format", &format)) return bad("lacks integer field \"format\"");
    if (format != kIndexFormat) return bad(absl::StrCat("has unsupported format ", format));
    if (!GetInt64(index, "step", &index_step)) return bad("lacks integer field \"step\"");
    if (!GetInt64(index, "shard", &index_shard)) return bad("lacks integer field \"shard\"");
    if (!GetInt64(index, "num_shards", &index_num_shards)) {
      return bad("lacks integer field \"num_shards\"");
    }
    if (index_step != step || index_shard != shard || index_num_shards != num_shards) {
      return bad(absl::StrCat("describes step ", index_step, " shard ", index_shard, " of ",
                              index_num_shards, ", but its path is step ", step, " shard ", shard,
                              " of ", num_shards));
    }
    const auto files = index.find("files");
    if (files == index.end() || !files->is_array()) return bad("lacks array field \"files\"");
    if (files->size() != 1) {
      return bad(absl::StrCat("lists ", files->size(), " files; expected 1"));
    }
    const nlohmann::json& file = (*files)[0];
    if (!file.is_object()) return bad("has a \"files\" entry that is not an object");
    const auto name = file.find("name");
    if (name == file.end() || !name->is_string()) return bad("lacks string field \"name\"");
    if (name->get<std::string>() != data_name) {
      return bad(absl::StrCat("names data file \"", name->get<std::string>(), "\"; expected \"",
                              data_name, "\""));
    }
    int64_t bytes = 0, crc = 0;
    if (!GetInt64(file, "bytes", &bytes) || bytes < 0) {
      return bad("lacks non-negative integer field \"bytes\"");
    }
    if (!GetInt64(file, "crc32", &crc) || crc < 0 || crc > std::numeric_limits<uint32_t>::max()) {
      return bad("lacks 32-bit unsigned integer field \"crc32\"");
    }
    return IndexEntry{static_cast<uint64_t>(bytes), static_cast<uint32_t>(crc)};
  } catch (const nlohmann::json::exception& e) {
    return bad(absl::StrCat("is malformed: ", e.what()));
  }
}

namespace {

// The data file of the complete checkpoint of shard/num_shards at `step`
// (its index is expected to exist) and what its index says of it, its size
// checked.
struct DataFile {
  std::string path;
  IndexEntry entry;
};
absl::StatusOr<DataFile> CheckedDataFile(io::FileSystem* fs, const std::string& root, int64_t step,
                                         int shard, int num_shards) {
  const std::string dir = CheckpointDir(root, step);
  const std::string stem = ShardStem(shard, num_shards);
  const std::string data_name = absl::StrCat(stem, kDataSuffix);
  const std::string data_path = JoinPath(dir, data_name);
  const std::string index_path = JoinPath(dir, absl::StrCat(stem, kIndexSuffix));

  auto text = ReadIndexFile(fs, index_path);
  if (!text.ok()) {
    if (absl::IsNotFound(text.status())) {
      return absl::NotFoundError(absl::StrCat("no complete checkpoint of ", stem, " at ", dir, ": ",
                                              text.status().message()));
    }
    return text.status();
  }
  PSC_ASSIGN_OR_RETURN(const IndexEntry entry,
                       ParseIndex(index_path, *text, step, shard, num_shards, data_name));

  auto size_or = fs->FileSize(data_path);
  if (absl::IsNotFound(size_or.status())) {
    return absl::DataLossError(absl::StrCat("checkpoint data file ", data_path,
                                            " is missing (listed by ", index_path, ")"));
  }
  if (!size_or.ok()) {
    return absl::InternalError(
        absl::StrCat("stat checkpoint data file: ", size_or.status().message()));
  }
  const uint64_t size = *size_or;
  if (size < entry.bytes) {
    return absl::DataLossError(absl::StrCat("checkpoint data file ", data_path, " is truncated: ",
                                            size, " bytes, index says ", entry.bytes));
  }
  if (size > entry.bytes) {
    return absl::DataLossError(absl::StrCat("checkpoint data file ", data_path, " has ", size,
                                            " bytes, index says ", entry.bytes,
                                            " (size mismatch)"));
  }
  return DataFile{data_path, entry};
}

// Reads the complete checkpoint of shard/num_shards at `step` (its index is
// expected to exist) and verifies the data against the index.
absl::StatusOr<ShardCheckpointData> ReadVerified(io::FileSystem* fs, const std::string& root,
                                                 int64_t step, int shard, int num_shards) {
  PSC_ASSIGN_OR_RETURN(const DataFile file, CheckedDataFile(fs, root, step, shard, num_shards));
  const std::string& data_path = file.path;
  const IndexEntry& entry = file.entry;
  ShardCheckpointData result;
  result.step = step;
  auto data = fs->ReadFile(data_path);
  if (!data.ok()) {
    return absl::InternalError(
        absl::StrCat("read checkpoint data file: ", data.status().message()));
  }
  result.data = *std::move(data);
  if (result.data.size() != entry.bytes) {
    return absl::DataLossError(absl::StrCat("checkpoint data file ", data_path,
                                            " is truncated: read ", result.data.size(),
                                            " bytes, index says ", entry.bytes));
  }
  const uint32_t crc = Crc32(result.data);
  if (crc != entry.crc32) {
    return absl::DataLossError(absl::StrCat("checkpoint data file ", data_path,
                                            " is corrupt: crc32 ", crc, ", index says ",
                                            entry.crc32));
  }
  return result;
}

// Opens the complete checkpoint of shard/num_shards at `step` (its index is
// expected to exist) and verifies the data against the index, reading it a
// MiB at a time.
absl::StatusOr<OpenShardCheckpointData> OpenVerified(io::FileSystem* fs, const std::string& root,
                                                     int64_t step, int shard, int num_shards) {
  PSC_ASSIGN_OR_RETURN(const DataFile file, CheckedDataFile(fs, root, step, shard, num_shards));
  auto opened = fs->OpenForRead(file.path);
  if (!opened.ok()) {
    return absl::InternalError(
        absl::StrCat("open checkpoint data file: ", opened.status().message()));
  }
  OpenShardCheckpointData result;
  result.step = step;
  result.file = *std::move(opened);
  if (result.file->size() != file.entry.bytes) {
    return absl::DataLossError(absl::StrCat("checkpoint data file ", file.path, " has ",
                                            result.file->size(), " bytes, index says ",
                                            file.entry.bytes, " (size mismatch)"));
  }
  uLong crc = crc32(0L, Z_NULL, 0);
  std::string piece;
  for (uint64_t offset = 0; offset < file.entry.bytes; offset += piece.size()) {
    piece.resize(
        static_cast<size_t>(std::min<uint64_t>(uint64_t{1} << 20, file.entry.bytes - offset)));
    if (absl::Status s = result.file->Read(offset, piece.size(), piece.data()); !s.ok()) {
      return absl::DataLossError(
          absl::StrCat("checkpoint data file ", file.path, ": ", s.message()));
    }
    crc = crc32(crc, reinterpret_cast<const Bytef*>(piece.data()), static_cast<uInt>(piece.size()));
  }
  if (static_cast<uint32_t>(crc) != file.entry.crc32) {
    return absl::DataLossError(absl::StrCat("checkpoint data file ", file.path,
                                            " is corrupt: crc32 ", static_cast<uint32_t>(crc),
                                            ", index says ", file.entry.crc32));
  }
  return result;
}

// Deletes this shard's files (index first) and stray temp files in `dir`, then
// the directory if that left it empty.
absl::Status PruneShardFilesIn(io::FileSystem* fs, const std::string& dir, int shard,
                               int num_shards) {
  const std::string stem = ShardStem(shard, num_shards);
  const std::string data_name = absl::StrCat(stem, kDataSuffix);
  const std::string index_name = absl::StrCat(stem, kIndexSuffix);
  PSC_RETURN_IF_ERROR(fs->RemoveFile(JoinPath(dir, index_name)));
  PSC_RETURN_IF_ERROR(fs->RemoveFile(JoinPath(dir, data_name)));

  const std::string data_temp = absl::StrCat(data_name, kTempInfix);
  const std::string index_temp = absl::StrCat(index_name, kTempInfix);
  PSC_ASSIGN_OR_RETURN(std::vector<std::string> names, ListNames(fs, dir, "checkpoint directory"));
  for (const std::string& name : names) {
    if (absl::StartsWith(name, data_temp) || absl::StartsWith(name, index_temp)) {
      PSC_RETURN_IF_ERROR(fs->RemoveFile(JoinPath(dir, name)));
    }
  }
  return fs->RemoveDirIfEmpty(dir);
}

}  // namespace

std::string CheckpointDir(const std::string& root, int64_t step) {
  return JoinPath(root, absl::StrCat(kStepDirPrefix, step));
}

absl::StatusOr<std::vector<std::string>> WriteShardCheckpoint(const std::string& root, int64_t step,
                                                              int shard, int num_shards,
                                                              absl::string_view data,
                                                              io::FileSystem* fs) {
  fs = OrLocal(fs);
  PSC_RETURN_IF_ERROR(ValidateShard(root, shard, num_shards));
  if (step < 0) {
    return absl::InvalidArgumentError(absl::StrCat("checkpoint step must be >= 0, got ", step));
  }
  const std::string dir = CheckpointDir(root, step);
  const std::string stem = ShardStem(shard, num_shards);
  const std::string data_name = absl::StrCat(stem, kDataSuffix);
  const std::string data_path = JoinPath(dir, data_name);
  const std::string index_path = JoinPath(dir, absl::StrCat(stem, kIndexSuffix));

  // Built first: nothing below can fail for lack of an index.
  PSC_ASSIGN_OR_RETURN(const std::string index_text,
                       BuildIndex(step, shard, num_shards, data_name, data));
  PSC_RETURN_IF_ERROR(MakeStepDir(fs, dir));
  // Overwriting: retire the old index durably before its data is replaced, so
  // no crash leaves an index next to bytes it does not describe.
  PSC_ASSIGN_OR_RETURN(const bool overwriting, PathExists(fs, index_path));
  if (overwriting) {
    PSC_RETURN_IF_ERROR(fs->RemoveFile(index_path));
    PSC_RETURN_IF_ERROR(fs->SyncDir(dir));
  }
  if (absl::Status s = fs->WriteFileAtomically(data_path, data); !s.ok()) {
    return absl::InternalError(s.message());
  }
  if (absl::Status s = fs->WriteFileAtomically(index_path, index_text); !s.ok()) {
    // The index may be in place without being known durable: do not let the
    // checkpoint look complete.
    fs->RemoveFile(index_path).IgnoreError();
    return absl::InternalError(s.message());
  }
  return std::vector<std::string>{data_path, index_path};
}

namespace {

// The step ReadShardCheckpoint and OpenShardCheckpoint read: `step`, or the
// newest complete one for -1, its index there; their errors otherwise.
absl::StatusOr<int64_t> ResolveStep(io::FileSystem* fs, const std::string& root, int64_t step,
                                    int shard, int num_shards) {
  PSC_RETURN_IF_ERROR(ValidateShard(root, shard, num_shards));
  if (step < -1) {
    return absl::InvalidArgumentError(
        absl::StrCat("checkpoint step must be >= 0, or -1 for the latest; got ", step));
  }
  const std::string stem = ShardStem(shard, num_shards);

  if (step == -1) {
    PSC_ASSIGN_OR_RETURN(const std::vector<int64_t> steps,
                         ListShardCheckpoints(root, shard, num_shards, fs));
    if (!steps.empty()) return steps.back();
    PSC_ASSIGN_OR_RETURN(const bool root_exists, PathExists(fs, root));
    if (!root_exists) {
      return absl::NotFoundError(
          absl::StrCat("no checkpoint of ", stem, ": checkpoint root ", root, " does not exist"));
    }
    PSC_ASSIGN_OR_RETURN(const std::vector<int64_t> all_steps, ListStepDirs(fs, root));
    for (auto it = all_steps.rbegin(); it != all_steps.rend(); ++it) {
      const std::string dir = CheckpointDir(root, *it);
      PSC_ASSIGN_OR_RETURN(const std::vector<int> counts,
                           OtherShardCounts(fs, dir, shard, num_shards));
      if (!counts.empty()) return ShardCountMismatch(dir, shard, num_shards, counts);
    }
    return absl::NotFoundError(absl::StrCat("no complete checkpoint of ", stem, " under ", root));
  }

  const std::string dir = CheckpointDir(root, step);
  const std::string data_path = JoinPath(dir, absl::StrCat(stem, kDataSuffix));
  const std::string index_path = JoinPath(dir, absl::StrCat(stem, kIndexSuffix));
  PSC_ASSIGN_OR_RETURN(const bool index_exists, PathExists(fs, index_path));
  if (index_exists) return step;

  PSC_ASSIGN_OR_RETURN(const bool root_exists, PathExists(fs, root));
  if (!root_exists) {
    return absl::NotFoundError(absl::StrCat("no checkpoint of ", stem, " at ", dir,
                                            ": checkpoint root ", root, " does not exist"));
  }
  PSC_ASSIGN_OR_RETURN(const bool data_exists, PathExists(fs, data_path));
  if (data_exists) {
    return absl::NotFoundError(absl::StrCat("checkpoint of ", stem, " at ", dir,
                                            " is incomplete: ", index_path, " does not exist"));
  }
  PSC_ASSIGN_OR_RETURN(const std::vector<int> counts, OtherShardCounts(fs, dir, shard, num_shards));
  if (!counts.empty()) return ShardCountMismatch(dir, shard, num_shards, counts);
  return absl::NotFoundError(
      absl::StrCat("no checkpoint of ", stem, " at ", dir, ": ", index_path, " does not exist"));
}

}  // namespace

absl::StatusOr<ShardCheckpointData> ReadShardCheckpoint(const std::string& root, int64_t step,
                                                        int shard, int num_shards,
                                                        io::FileSystem* fs) {
  fs = OrLocal(fs);
  PSC_ASSIGN_OR_RETURN(const int64_t found, ResolveStep(fs, root, step, shard, num_shards));
  return ReadVerified(fs, root, found, shard, num_shards);
}

absl::StatusOr<OpenShardCheckpointData> OpenShardCheckpoint(const std::string& root, int64_t step,
                                                            int shard, int num_shards,
                                                            io::FileSystem* fs) {
  fs = OrLocal(fs);
  PSC_ASSIGN_OR_RETURN(const int64_t found, ResolveStep(fs, root, step, shard, num_shards));
  return OpenVerified(fs, root, found, shard, num_shards);
}

absl::StatusOr<std::vector<int64_t>> ListShardCheckpoints(const std::string& root, int shard,
                                                          int num_shards, io::FileSystem* fs) {
  fs = OrLocal(fs);
  PSC_RETURN_IF_ERROR(ValidateShard(root, shard, num_shards));
  const std::string index_name = absl::StrCat(ShardStem(shard, num_shards), kIndexSuffix);
  PSC_ASSIGN_OR_RETURN(const std::vector<int64_t> all_steps, ListStepDirs(fs, root));
  std::vector<int64_t> steps;
  for (const int64_t step : all_steps) {
    PSC_ASSIGN_OR_RETURN(const bool complete,
                         PathExists(fs, JoinPath(CheckpointDir(root, step), index_name)));
    if (complete) steps.push_back(step);
  }
  return steps;
}

absl::Status PruneShardCheckpoints(const std::string& root, int shard, int num_shards, int keep,
                                   io::FileSystem* fs) {
  fs = OrLocal(fs);
  PSC_RETURN_IF_ERROR(ValidateShard(root, shard, num_shards));
  if (keep < 1) {
    return absl::InvalidArgumentError(absl::StrCat("keep must be >= 1, got ", keep));
  }
  PSC_ASSIGN_OR_RETURN(const std::vector<int64_t> complete,
                       ListShardCheckpoints(root, shard, num_shards, fs));
  if (complete.empty()) return absl::OkStatus();
  const size_t first_kept =
      complete.size() > static_cast<size_t>(keep) ? complete.size() - keep : 0;
  const int64_t oldest_kept = complete[first_kept];
  PSC_ASSIGN_OR_RETURN(const std::vector<int64_t> all_steps, ListStepDirs(fs, root));
  for (const int64_t step : all_steps) {
    if (step >= oldest_kept) break;
    PSC_RETURN_IF_ERROR(PruneShardFilesIn(fs, CheckpointDir(root, step), shard, num_shards));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<CompleteCheckpoint>> ListCompleteCheckpoints(const std::string& root,
                                                                        io::FileSystem* fs) {
  fs = OrLocal(fs);
  if (root.empty()) return absl::InvalidArgumentError("checkpoint root is empty");
  PSC_ASSIGN_OR_RETURN(const std::vector<int64_t> all_steps, ListStepDirs(fs, root));
  std::vector<CompleteCheckpoint> complete;
  for (const int64_t step : all_steps) {
    PSC_ASSIGN_OR_RETURN(const std::vector<int> counts,
                         CompleteShardCounts(fs, CheckpointDir(root, step)));
    for (const int count : counts) complete.push_back({step, count});
  }
  return complete;
}

}  // namespace checkpoint
}  // namespace psc
