#include "common/records/record_counts.h"

#include <sys/stat.h>

#include <map>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/base/status_macros.h"
#include "common/records/csv_reader.h"
#include "common/tfrecord/record_reader.h"
#include "nlohmann/json.hpp"

namespace psc::records {
namespace {

using Json = nlohmann::json;

// What identifies a file's contents for the cache: its size and its
// modification time in nanoseconds.
struct Stamp {
  uint64_t size = 0;
  int64_t mtime_ns = 0;
  bool operator==(const Stamp& o) const { return size == o.size && mtime_ns == o.mtime_ns; }
};

absl::StatusOr<Stamp> StampOf(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    return absl::NotFoundError(absl::StrCat(path, ": cannot stat it"));
  }
  return Stamp{static_cast<uint64_t>(st.st_size),
               static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec};
}

// path -> (stamp, records), from a well-formed cache; empty otherwise.
std::map<std::string, std::pair<Stamp, int64_t>> ReadCache(io::FileSystem* fs,
                                                           const std::string& cache) {
  std::map<std::string, std::pair<Stamp, int64_t>> out;
  if (cache.empty()) return out;
  absl::StatusOr<uint64_t> size = fs->FileSize(cache);
  if (!size.ok() || *size > (uint64_t{64} << 20)) return out;
  absl::StatusOr<std::string> text = fs->ReadFile(cache);
  if (!text.ok()) return out;
  const Json j = Json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("files") || !j["files"].is_array()) return out;
  for (const Json& f : j["files"]) {
    if (!f.is_object() || !f.contains("path") || !f["path"].is_string() || !f.contains("size") ||
        !f["size"].is_number_unsigned() || !f.contains("mtime_ns") ||
        !f["mtime_ns"].is_number_integer() || !f.contains("records") ||
        !f["records"].is_number_integer() || f["records"].get<int64_t>() < 0) {
      continue;
    }
    out[f["path"].get<std::string>()] = {
        Stamp{f["size"].get<uint64_t>(), f["mtime_ns"].get<int64_t>()},
        f["records"].get<int64_t>()};
  }
  return out;
}

// A file's records; under skip_corrupt, damage that loses the rest of the
// file (a bad header, a truncated or damaged stream) ends the count there
// and is described in *damage.
absl::StatusOr<int64_t> CountFile(io::FileSystem* fs, const std::string& path, const ReadOptions& o,
                                  std::string* damage) {
  int64_t n = 0;
  bool end = false;
  const auto lost = [&](const absl::Status& s) {
    if (!o.skip_corrupt || !absl::IsDataLoss(s)) return false;
    *damage = std::string(s.message());
    return true;
  };
  if (o.format == FileFormat::kCsv) {
    PSC_ASSIGN_OR_RETURN(std::unique_ptr<CsvReader> reader,
                         CsvReader::Open(fs, path, o.compression, o.max_record_bytes));
    std::vector<std::string> fields;
    PSC_RETURN_IF_ERROR(reader->Next(&fields, &end));  // the header
    while (!end) {
      if (absl::Status s = reader->Next(&fields, &end); !s.ok()) {
        if (lost(s)) return n;
        return s;
      }
      if (!end) ++n;
    }
    return n;
  }
  PSC_ASSIGN_OR_RETURN(std::unique_ptr<tfrecord::RecordReader> reader,
                       tfrecord::RecordReader::Open(fs, path, o.compression, o.max_record_bytes));
  while (true) {
    if (absl::Status s = reader->Skip(&end); !s.ok()) {
      if (lost(s)) return n;
      return s;
    }
    if (end) return n;
    ++n;
  }
}

}  // namespace

absl::StatusOr<RecordCounts> CountRecords(io::FileSystem* fs, const std::vector<std::string>& files,
                                          const ReadOptions& options, const std::string& cache) {
  const absl::Time start = absl::Now();
  const auto cached = ReadCache(fs, cache);
  RecordCounts out;
  Json written = Json::array();
  for (const std::string& path : files) {
    PSC_ASSIGN_OR_RETURN(const Stamp stamp, StampOf(path));
    const auto it = cached.find(path);
    int64_t n = 0;
    std::string damage;
    if (it != cached.end() && it->second.first == stamp) {
      n = it->second.second;
    } else {
      PSC_ASSIGN_OR_RETURN(n, CountFile(fs, path, options, &damage));
      ++out.counted;
    }
    out.records.push_back(n);
    if (!damage.empty()) {  // counted again by every job, so that each reports it
      out.damaged.emplace_back(path, std::move(damage));
      continue;
    }
    written.push_back(
        {{"path", path}, {"size", stamp.size}, {"mtime_ns", stamp.mtime_ns}, {"records", n}});
  }
  if (!cache.empty() && out.counted > 0) {
    const Json j = {{"files", written}};
    // A cache that cannot be written costs only the next pass.
    fs->WriteFileAtomically(cache, j.dump(1, ' ', false, Json::error_handler_t::replace))
        .IgnoreError();
  }
  out.seconds = absl::ToDoubleSeconds(absl::Now() - start);
  return out;
}

}  // namespace psc::records
