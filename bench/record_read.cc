// Records per second one thread reads through a feature spec, as a job reads
// its data files (records/record_files.h: framing and CRCs, inflating,
// parsing each tf.train.Example, checking and converting its values into the
// arrays). bench/record_read.sh runs it beside tf.data on the same files.
//
// Usage: record_read --files=GLOB --spec=FILE [--format=tfrecord|csv]
// Prints one JSON object: records, seconds, records_per_second, bytes.
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/time/clock.h"
#include "common/io/file_system.h"
#include "common/io/glob.h"
#include "common/records/record_files.h"
#include "nlohmann/json.hpp"

ABSL_FLAG(std::string, files, "", "The files to read (a glob).");
ABSL_FLAG(std::string, spec, "", "The feature spec; every input needs a \"shape\".");
ABSL_FLAG(std::string, format, "tfrecord", "tfrecord or csv.");

namespace {

int Fail(const absl::Status& s) {
  std::fprintf(stderr, "record_read: %s\n", std::string(s.message()).c_str());
  return 1;
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
  const absl::Time start = absl::Now();
  auto read = psc::records::ReadSplit(fs, *files, *layout, options, "bench");
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  if (!read.ok()) return Fail(read.status());
  nlohmann::json out = {{"records", read->records},
                        {"seconds", seconds},
                        {"records_per_second", static_cast<double>(read->records) / seconds},
                        {"file_bytes", bytes}};
  std::printf("%s\n", out.dump().c_str());
  return 0;
}
