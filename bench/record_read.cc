// Records per second one thread reads through a feature spec, as a job reads
// its data files (records/record_files.h: framing and CRCs, inflating,
// parsing each tf.train.Example, checking and converting its values into the
// arrays). bench/record_read.sh runs it beside tf.data on the same files.
//
// --read=whole: the split read into one set of arrays (records::ReadSplit,
// a job's files under 1 GiB). --read=stream: the files read a chunk of
// --chunk records at a time into arrays that are dropped after each chunk
// (records::PieceReader, a streamed job's reader under its shuffle buffer),
// as tf.data's batches are; the counting pass before it, which a job runs
// once on the chief, is timed apart (count_seconds).
//
// Usage: record_read --files=GLOB --spec=FILE [--format=tfrecord|csv]
//                    [--read=whole|stream] [--chunk=512]
// Prints one JSON object: records, seconds, records_per_second, bytes.
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/time/clock.h"
#include "common/base/status_macros.h"
#include "common/io/file_system.h"
#include "common/io/glob.h"
#include "common/records/piece_reader.h"
#include "common/records/record_counts.h"
#include "common/records/record_files.h"
#include "common/records/row_layout.h"
#include "nlohmann/json.hpp"

ABSL_FLAG(std::string, files, "", "The files to read (a glob).");
ABSL_FLAG(std::string, spec, "", "The feature spec; every input needs a \"shape\".");
ABSL_FLAG(std::string, format, "tfrecord", "tfrecord or csv.");
ABSL_FLAG(std::string, read, "whole", "whole (into one set of arrays) or stream (chunks).");
ABSL_FLAG(int64_t, chunk, 512, "Records a chunk under --read=stream.");

namespace {

int Fail(const absl::Status& s) {
  std::fprintf(stderr, "record_read: %s\n", std::string(s.message()).c_str());
  return 1;
}

// Every file read whole as pieces, a chunk at a time; the records read.
absl::StatusOr<int64_t> Stream(psc::io::FileSystem* fs, const std::vector<std::string>& files,
                               const std::vector<int64_t>& counts,
                               const psc::records::RowLayout& layout,
                               const psc::records::ReadOptions& options, int64_t chunk) {
  std::vector<psc::records::Piece> pieces;
  for (size_t f = 0; f < files.size(); ++f) {
    pieces.push_back({static_cast<int>(f), 0, counts[f]});
  }
  psc::records::PieceReader reader(fs, files, pieces, &layout, options);
  int64_t records = 0;
  for (;;) {
    psc::records::RowBuffer rows(&layout);
    PSC_ASSIGN_OR_RETURN(const int64_t n, reader.Read(chunk, &rows));
    if (n == 0) return records;
    records += n;
    PSC_ASSIGN_OR_RETURN(auto arrays, rows.Take("x_train/", "y_train", "w_train"));
  }
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  psc::io::FileSystem* fs = psc::io::LocalFileSystem();
  auto files = psc::io::ExpandGlob(absl::GetFlag(FLAGS_files));
  if (!files.ok()) return Fail(files.status());
  auto json = fs->ReadFile(absl::GetFlag(FLAGS_spec));
  if (!json.ok()) return Fail(json.status());
  auto spec = psc::records::ParseFeatureSpec(*json, absl::GetFlag(FLAGS_spec));
  if (!spec.ok()) return Fail(spec.status());
  std::vector<psc::records::InputSlot> inputs;
  for (const psc::records::FeatureColumn& c : spec->inputs) {
    psc::records::InputSlot slot;
    slot.name = c.key;
    slot.shape = c.shape;
    slot.integers = true;  // int64 kept as int64, as ids are
    inputs.push_back(slot);
  }
  auto layout = psc::records::ResolveLayout(*spec, inputs, {}, {}, absl::GetFlag(FLAGS_spec));
  if (!layout.ok()) return Fail(layout.status());
  psc::records::ReadOptions options;
  options.format = absl::GetFlag(FLAGS_format) == "csv" ? psc::records::FileFormat::kCsv
                                                        : psc::records::FileFormat::kTfRecord;
  uint64_t bytes = 0;
  for (const std::string& f : *files) bytes += fs->FileSize(f).value_or(0);
  const std::string mode = absl::GetFlag(FLAGS_read);
  const int64_t chunk = absl::GetFlag(FLAGS_chunk);
  if ((mode != "whole" && mode != "stream") || chunk < 1 || chunk > (int64_t{1} << 20)) {
    return Fail(absl::InvalidArgumentError("--read takes whole or stream, --chunk 1..2^20"));
  }
  double count_seconds = 0;
  std::vector<int64_t> counts;
  if (mode == "stream") {
    auto c = psc::records::CountRecords(fs, *files, options, "");
    if (!c.ok()) return Fail(c.status());
    counts = c->records;
    count_seconds = c->seconds;
  }
  const absl::Time start = absl::Now();
  int64_t records = 0;
  if (mode == "stream") {
    auto read = Stream(fs, *files, counts, *layout, options, chunk);
    if (!read.ok()) return Fail(read.status());
    records = *read;
  } else {
    auto read = psc::records::ReadSplit(fs, *files, *layout, options, "bench");
    if (!read.ok()) return Fail(read.status());
    records = read->records;
  }
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  nlohmann::json out = {{"read", mode},
                        {"records", records},
                        {"seconds", seconds},
                        {"records_per_second", static_cast<double>(records) / seconds},
                        {"count_seconds", count_seconds},
                        {"file_bytes", bytes}};
  std::printf("%s\n", out.dump().c_str());
  return 0;
}
