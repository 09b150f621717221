#include "launcher/data_commands.h"

#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/base/status_macros.h"
#include "common/io/file_system.h"
#include "common/io/glob.h"
#include "common/tfrecord/example.h"
#include "common/tfrecord/record_reader.h"

namespace psc {
namespace launcher {

absl::StatusOr<std::string> InspectRecords(const std::string& glob, int records,
                                           std::optional<tfrecord::Compression> compression,
                                           uint64_t max_record_bytes) {
  if (records < 1) {
    return absl::InvalidArgumentError(absl::StrCat("--records=", records, ": want at least 1"));
  }
  PSC_ASSIGN_OR_RETURN(const std::vector<std::string> files, io::ExpandGlob(glob));
  io::FileSystem* fs = io::LocalFileSystem();
  uint64_t bytes = 0;
  for (const std::string& f : files) {
    PSC_ASSIGN_OR_RETURN(const uint64_t size, fs->FileSize(f));
    bytes += size;
  }
  PSC_ASSIGN_OR_RETURN(std::unique_ptr<tfrecord::RecordReader> reader,
                       tfrecord::RecordReader::Open(fs, files[0], compression, max_record_bytes));
  std::string out = absl::StrFormat("%d file%s, %d bytes; the first, %s, is %s\n", files.size(),
                                    files.size() == 1 ? "" : "s", bytes, files[0],
                                    reader->compression() == tfrecord::Compression::kNone
                                        ? "uncompressed"
                                        : tfrecord::CompressionName(reader->compression()));
  std::string record;
  for (int i = 0; i < records; ++i) {
    bool end = false;
    PSC_RETURN_IF_ERROR(reader->Next(&record, &end));
    if (end) {
      absl::StrAppend(&out, i == 0 ? "it holds no record\n" : "");
      break;
    }
    const std::string where =
        absl::StrCat(files[0], ": the record at offset ", reader->record_offset());
    tfexample::Example example;
    PSC_RETURN_IF_ERROR(tfrecord::ParseExample(record, where, &example));
    absl::StrAppendFormat(&out, "record %d (offset %d, %d bytes): %d features\n", i,
                          reader->record_offset(), record.size(),
                          example.features().feature_size());
    absl::StrAppend(&out, tfrecord::DescribeExample(example, 5));
  }
  return out;
}

}  // namespace launcher
}  // namespace psc
