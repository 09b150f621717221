#include "common/checkpoint/checkpoint_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstddef>
#include <filesystem>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <system_error>
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
constexpr off_t kMaxIndexBytes = 1 << 20;
constexpr absl::string_view kStepDirPrefix = "ckpt-";
constexpr absl::string_view kDataSuffix = ".data";
constexpr absl::string_view kIndexSuffix = ".index";
constexpr absl::string_view kTempInfix = ".tmp.";

std::string ErrnoText(int err) { return std::generic_category().message(err); }

absl::Status IoError(absl::string_view op, absl::string_view path, int err) {
  return absl::InternalError(absl::StrCat(op, " ", path, ": ", ErrnoText(err)));
}

std::string JoinPath(absl::string_view dir, absl::string_view name) {
  if (!dir.empty() && dir.back() == '/') return absl::StrCat(dir, name);
  return absl::StrCat(dir, "/", name);
}

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

// Whether `path` exists (of any type). ENOENT/ENOTDIR mean no; other stat
// failures are INTERNAL.
absl::StatusOr<bool> PathExists(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) == 0) return true;
  if (errno == ENOENT || errno == ENOTDIR) return false;
  return IoError("stat", path, errno);
}

int CloseFd(int fd) {
  // Linux closes the descriptor even when close() fails with EINTR; do not
  // retry, but report it.
  return ::close(fd) == 0 ? 0 : errno;
}

// Writes all of `data` to `fd`, retrying partial writes and EINTR. Returns 0 or
// an errno value.
int WriteAll(int fd, absl::string_view data) {
  const char* p = data.data();
  size_t left = data.size();
  while (left > 0) {
    const size_t chunk = std::min<size_t>(left, size_t{1} << 30);
    const ssize_t n = ::write(fd, p, chunk);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (n == 0) return EIO;
    p += n;
    left -= static_cast<size_t>(n);
  }
  return 0;
}

// Reads up to `size` bytes from `fd` into `out`, stopping early only at end of
// file (then `out` is shorter than `size`). Returns 0 or an errno value.
int ReadUpTo(int fd, size_t size, std::string* out) {
  out->resize(size);
  size_t got = 0;
  while (got < size) {
    const size_t chunk = std::min<size_t>(size - got, size_t{1} << 30);
    const ssize_t n = ::read(fd, out->data() + got, chunk);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  out->resize(got);
  return 0;
}

absl::Status FsyncDir(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return IoError("open directory", dir, errno);
  int err = 0;
  while (::fsync(fd) != 0) {
    if (errno != EINTR) {
      err = errno;
      break;
    }
  }
  const int close_err = CloseFd(fd);
  if (err != 0) return IoError("fsync directory", dir, err);
  if (close_err != 0) return IoError("close directory", dir, close_err);
  return absl::OkStatus();
}

// mkdir -p that tolerates concurrent creators. When it creates the step
// directory itself, fsyncs its parent so the new entry is durable.
absl::Status MakeStepDir(const std::string& root, const std::string& dir) {
  std::error_code ec;
  const bool created = fs::create_directories(dir, ec);
  if (ec) {
    std::error_code is_dir_ec;
    if (!fs::is_directory(dir, is_dir_ec)) {
      return absl::InternalError(absl::StrCat("create directory ", dir, ": ", ec.message()));
    }
    return absl::OkStatus();  // Another shard created it meanwhile.
  }
  if (created) return FsyncDir(root);
  return absl::OkStatus();
}

// Next temporary name for `final_path`: "<final>.tmp.<pid>.<counter>".
std::string TempName(const std::string& final_path) {
  static std::atomic<uint64_t> counter{0};
  return absl::StrCat(final_path, kTempInfix, ::getpid(), ".", counter.fetch_add(1));
}

// Writes `contents` to a fresh temporary file beside `final_path`, fsyncs and
// closes it, and returns its path. On failure the temporary file is removed.
absl::StatusOr<std::string> WriteSyncedTempFile(const std::string& final_path,
                                                absl::string_view contents) {
  std::string temp;
  int fd = -1;
  // O_EXCL guards against a stale temp file left by a crashed process whose
  // pid was reused; skip such names.
  for (int attempt = 0; attempt < 16 && fd < 0; ++attempt) {
    temp = TempName(final_path);
    fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0 && errno != EEXIST) return IoError("create", temp, errno);
  }
  if (fd < 0) return IoError("create", temp, EEXIST);

  absl::Status status;
  if (const int err = WriteAll(fd, contents); err != 0) {
    status = IoError("write", temp, err);
  } else {
    while (::fsync(fd) != 0) {
      if (errno != EINTR) {
        status = IoError("fsync", temp, errno);
        break;
      }
    }
  }
  const int close_err = CloseFd(fd);
  if (status.ok() && close_err != 0) status = IoError("close", temp, close_err);
  if (!status.ok()) {
    ::unlink(temp.c_str());
    return status;
  }
  return temp;
}

absl::Status RenameOrRemove(const std::string& temp, const std::string& final_path) {
  if (::rename(temp.c_str(), final_path.c_str()) != 0) {
    const int err = errno;
    ::unlink(temp.c_str());
    return absl::InternalError(
        absl::StrCat("rename ", temp, " to ", final_path, ": ", ErrnoText(err)));
  }
  return absl::OkStatus();
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

// The names of the entries of `dir` ("list <what> <dir>" in errors). A
// missing directory has none.
absl::StatusOr<std::vector<std::string>> ListNames(const std::string& dir, const char* what) {
  std::vector<std::string> names;
  std::error_code ec;
  fs::directory_iterator it(dir, ec);
  if (ec == std::errc::no_such_file_or_directory) return names;
  for (; !ec && it != fs::directory_iterator(); it.increment(ec)) {
    names.push_back(it->path().filename().string());
  }
  if (ec) return absl::InternalError(absl::StrCat("list ", what, " ", dir, ": ", ec.message()));
  return names;
}

// Steps of all "ckpt-<step>" directories under `root`, ascending. A missing
// root gives an empty list.
absl::StatusOr<std::vector<int64_t>> ListStepDirs(const std::string& root) {
  PSC_ASSIGN_OR_RETURN(std::vector<std::string> names, ListNames(root, "checkpoint root"));
  std::vector<int64_t> steps;
  for (const std::string& name : names) {
    absl::string_view rest = name;
    int64_t step = 0;
    if (!absl::ConsumePrefix(&rest, kStepDirPrefix) || !ParseCanonicalInt64(rest, &step)) continue;
    std::error_code type_ec;
    if (!fs::is_directory(JoinPath(root, name), type_ec)) continue;
    steps.push_back(step);
  }
  std::sort(steps.begin(), steps.end());
  return steps;
}

// The shard counts n for which `dir` holds the .index of every shard
// "shard-<i>-of-<n>", i in [0, n), ascending. Names that do not parse
// canonically (or with i >= n) are ignored. A missing directory gives none.
absl::StatusOr<std::vector<int>> CompleteShardCounts(const std::string& dir) {
  PSC_ASSIGN_OR_RETURN(std::vector<std::string> names, ListNames(dir, "checkpoint directory"));
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
absl::StatusOr<std::vector<int>> OtherShardCounts(const std::string& dir, int shard,
                                                  int num_shards) {
  PSC_ASSIGN_OR_RETURN(std::vector<std::string> names, ListNames(dir, "checkpoint directory"));
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
absl::StatusOr<std::string> ReadIndexFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return absl::NotFoundError(absl::StrCat(path, " does not exist"));
    return absl::DataLossError(
        absl::StrCat("checkpoint index ", path, " is unreadable: open: ", ErrnoText(errno)));
  }
  struct stat st;
  std::string text;
  int err = 0;
  if (::fstat(fd, &st) != 0) {
    err = errno;
  } else if (st.st_size > kMaxIndexBytes) {
    CloseFd(fd);
    return absl::DataLossError(
        absl::StrCat("checkpoint index ", path, " is too large (", st.st_size, " bytes)"));
  } else {
    err = ReadUpTo(fd, static_cast<size_t>(st.st_size), &text);
  }
  CloseFd(fd);
  if (err != 0) {
    return absl::DataLossError(
        absl::StrCat("checkpoint index ", path, " is unreadable: ", ErrnoText(err)));
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

struct IndexEntry {
  uint64_t bytes = 0;
  uint32_t crc32 = 0;
};

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

// Reads the complete checkpoint of shard/num_shards at `step` (its index is
// expected to exist) and verifies the data against the index.
absl::StatusOr<ShardCheckpointData> ReadVerified(const std::string& root, int64_t step, int shard,
                                                 int num_shards) {
  const std::string dir = CheckpointDir(root, step);
  const std::string stem = ShardStem(shard, num_shards);
  const std::string data_name = absl::StrCat(stem, kDataSuffix);
  const std::string data_path = JoinPath(dir, data_name);
  const std::string index_path = JoinPath(dir, absl::StrCat(stem, kIndexSuffix));

  auto text = ReadIndexFile(index_path);
  if (!text.ok()) {
    if (absl::IsNotFound(text.status())) {
      return absl::NotFoundError(absl::StrCat("no complete checkpoint of ", stem, " at ", dir, ": ",
                                              text.status().message()));
    }
    return text.status();
  }
  PSC_ASSIGN_OR_RETURN(const IndexEntry entry,
                       ParseIndex(index_path, *text, step, shard, num_shards, data_name));

  const int fd = ::open(data_path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) {
      return absl::DataLossError(absl::StrCat("checkpoint data file ", data_path,
                                              " is missing (listed by ", index_path, ")"));
    }
    return IoError("open checkpoint data file", data_path, errno);
  }
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    CloseFd(fd);
    return IoError("stat checkpoint data file", data_path, err);
  }
  const auto size = static_cast<uint64_t>(st.st_size);
  if (size < entry.bytes) {
    CloseFd(fd);
    return absl::DataLossError(absl::StrCat("checkpoint data file ", data_path, " is truncated: ",
                                            size, " bytes, index says ", entry.bytes));
  }
  if (size > entry.bytes) {
    CloseFd(fd);
    return absl::DataLossError(absl::StrCat("checkpoint data file ", data_path, " has ", size,
                                            " bytes, index says ", entry.bytes,
                                            " (size mismatch)"));
  }
  ShardCheckpointData result;
  result.step = step;
  const int err = ReadUpTo(fd, static_cast<size_t>(entry.bytes), &result.data);
  CloseFd(fd);
  if (err != 0) return IoError("read checkpoint data file", data_path, err);
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

absl::Status RemoveIfPresent(const std::string& path) {
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) return IoError("remove", path, errno);
  return absl::OkStatus();
}

// Deletes this shard's files (index first) and stray temp files in `dir`, then
// the directory if that left it empty.
absl::Status PruneShardFilesIn(const std::string& dir, int shard, int num_shards) {
  const std::string stem = ShardStem(shard, num_shards);
  const std::string data_name = absl::StrCat(stem, kDataSuffix);
  const std::string index_name = absl::StrCat(stem, kIndexSuffix);
  PSC_RETURN_IF_ERROR(RemoveIfPresent(JoinPath(dir, index_name)));
  PSC_RETURN_IF_ERROR(RemoveIfPresent(JoinPath(dir, data_name)));

  const std::string data_temp = absl::StrCat(data_name, kTempInfix);
  const std::string index_temp = absl::StrCat(index_name, kTempInfix);
  PSC_ASSIGN_OR_RETURN(std::vector<std::string> names, ListNames(dir, "checkpoint directory"));
  for (const std::string& name : names) {
    if (absl::StartsWith(name, data_temp) || absl::StartsWith(name, index_temp)) {
      PSC_RETURN_IF_ERROR(RemoveIfPresent(JoinPath(dir, name)));
    }
  }

  if (::rmdir(dir.c_str()) != 0 && errno != ENOTEMPTY && errno != EEXIST && errno != ENOENT) {
    return IoError("remove directory", dir, errno);
  }
  return absl::OkStatus();
}

}  // namespace

std::string CheckpointDir(const std::string& root, int64_t step) {
  return JoinPath(root, absl::StrCat(kStepDirPrefix, step));
}

absl::StatusOr<std::vector<std::string>> WriteShardCheckpoint(const std::string& root, int64_t step,
                                                              int shard, int num_shards,
                                                              absl::string_view data) {
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
  PSC_RETURN_IF_ERROR(MakeStepDir(root, dir));
  PSC_ASSIGN_OR_RETURN(const std::string data_temp, WriteSyncedTempFile(data_path, data));

  // Overwriting: retire the old index durably before its data is replaced, so
  // no crash leaves an index next to bytes it does not describe.
  if (::unlink(index_path.c_str()) == 0) {
    if (absl::Status s = FsyncDir(dir); !s.ok()) {
      ::unlink(data_temp.c_str());
      return s;
    }
  } else if (errno != ENOENT) {
    const int err = errno;
    ::unlink(data_temp.c_str());
    return IoError("remove old index", index_path, err);
  }
  PSC_RETURN_IF_ERROR(RenameOrRemove(data_temp, data_path));

  PSC_ASSIGN_OR_RETURN(const std::string index_temp, WriteSyncedTempFile(index_path, index_text));
  PSC_RETURN_IF_ERROR(RenameOrRemove(index_temp, index_path));
  if (absl::Status s = FsyncDir(dir); !s.ok()) {
    // The checkpoint is not known to be durable: do not let it look complete.
    ::unlink(index_path.c_str());
    return s;
  }
  return std::vector<std::string>{data_path, index_path};
}

absl::StatusOr<ShardCheckpointData> ReadShardCheckpoint(const std::string& root, int64_t step,
                                                        int shard, int num_shards) {
  PSC_RETURN_IF_ERROR(ValidateShard(root, shard, num_shards));
  if (step < -1) {
    return absl::InvalidArgumentError(
        absl::StrCat("checkpoint step must be >= 0, or -1 for the latest; got ", step));
  }
  const std::string stem = ShardStem(shard, num_shards);

  if (step == -1) {
    PSC_ASSIGN_OR_RETURN(const std::vector<int64_t> steps,
                         ListShardCheckpoints(root, shard, num_shards));
    if (!steps.empty()) return ReadVerified(root, steps.back(), shard, num_shards);
    PSC_ASSIGN_OR_RETURN(const bool root_exists, PathExists(root));
    if (!root_exists) {
      return absl::NotFoundError(
          absl::StrCat("no checkpoint of ", stem, ": checkpoint root ", root, " does not exist"));
    }
    PSC_ASSIGN_OR_RETURN(const std::vector<int64_t> all_steps, ListStepDirs(root));
    for (auto it = all_steps.rbegin(); it != all_steps.rend(); ++it) {
      const std::string dir = CheckpointDir(root, *it);
      PSC_ASSIGN_OR_RETURN(const std::vector<int> counts, OtherShardCounts(dir, shard, num_shards));
      if (!counts.empty()) return ShardCountMismatch(dir, shard, num_shards, counts);
    }
    return absl::NotFoundError(absl::StrCat("no complete checkpoint of ", stem, " under ", root));
  }

  const std::string dir = CheckpointDir(root, step);
  const std::string data_path = JoinPath(dir, absl::StrCat(stem, kDataSuffix));
  const std::string index_path = JoinPath(dir, absl::StrCat(stem, kIndexSuffix));
  PSC_ASSIGN_OR_RETURN(const bool index_exists, PathExists(index_path));
  if (index_exists) return ReadVerified(root, step, shard, num_shards);

  PSC_ASSIGN_OR_RETURN(const bool root_exists, PathExists(root));
  if (!root_exists) {
    return absl::NotFoundError(absl::StrCat("no checkpoint of ", stem, " at ", dir,
                                            ": checkpoint root ", root, " does not exist"));
  }
  PSC_ASSIGN_OR_RETURN(const bool data_exists, PathExists(data_path));
  if (data_exists) {
    return absl::NotFoundError(absl::StrCat("checkpoint of ", stem, " at ", dir,
                                            " is incomplete: ", index_path, " does not exist"));
  }
  PSC_ASSIGN_OR_RETURN(const std::vector<int> counts, OtherShardCounts(dir, shard, num_shards));
  if (!counts.empty()) return ShardCountMismatch(dir, shard, num_shards, counts);
  return absl::NotFoundError(
      absl::StrCat("no checkpoint of ", stem, " at ", dir, ": ", index_path, " does not exist"));
}

absl::StatusOr<std::vector<int64_t>> ListShardCheckpoints(const std::string& root, int shard,
                                                          int num_shards) {
  PSC_RETURN_IF_ERROR(ValidateShard(root, shard, num_shards));
  const std::string index_name = absl::StrCat(ShardStem(shard, num_shards), kIndexSuffix);
  PSC_ASSIGN_OR_RETURN(const std::vector<int64_t> all_steps, ListStepDirs(root));
  std::vector<int64_t> steps;
  for (const int64_t step : all_steps) {
    PSC_ASSIGN_OR_RETURN(const bool complete,
                         PathExists(JoinPath(CheckpointDir(root, step), index_name)));
    if (complete) steps.push_back(step);
  }
  return steps;
}

absl::Status PruneShardCheckpoints(const std::string& root, int shard, int num_shards, int keep) {
  PSC_RETURN_IF_ERROR(ValidateShard(root, shard, num_shards));
  if (keep < 1) {
    return absl::InvalidArgumentError(absl::StrCat("keep must be >= 1, got ", keep));
  }
  PSC_ASSIGN_OR_RETURN(const std::vector<int64_t> complete,
                       ListShardCheckpoints(root, shard, num_shards));
  if (complete.empty()) return absl::OkStatus();
  const size_t first_kept =
      complete.size() > static_cast<size_t>(keep) ? complete.size() - keep : 0;
  const int64_t oldest_kept = complete[first_kept];
  PSC_ASSIGN_OR_RETURN(const std::vector<int64_t> all_steps, ListStepDirs(root));
  for (const int64_t step : all_steps) {
    if (step >= oldest_kept) break;
    PSC_RETURN_IF_ERROR(PruneShardFilesIn(CheckpointDir(root, step), shard, num_shards));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<CompleteCheckpoint>> ListCompleteCheckpoints(const std::string& root) {
  if (root.empty()) return absl::InvalidArgumentError("checkpoint root is empty");
  PSC_ASSIGN_OR_RETURN(const std::vector<int64_t> all_steps, ListStepDirs(root));
  std::vector<CompleteCheckpoint> complete;
  for (const int64_t step : all_steps) {
    PSC_ASSIGN_OR_RETURN(const std::vector<int> counts,
                         CompleteShardCounts(CheckpointDir(root, step)));
    for (const int count : counts) complete.push_back({step, count});
  }
  return complete;
}

}  // namespace checkpoint
}  // namespace psc
