// One split of a job's data files (TFRecord files of tf.train.Example, or
// CSV files with a header row) read through the feature spec's layout
// into the arrays an .npz would hold (row_layout.h), in file order, each
// file's records in order. A damaged or bad record is an error naming the
// file, the record and (for a value) the feature; with skip_corrupt it is
// skipped and counted per file instead (never a missing file, or a record
// over max_record_bytes): a bad data CRC or a record whose
// features do not fit the spec skips that record, a damaged header or
// compressed stream loses the rest of its file (counted as one record).
// Blocks on file I/O. Thread-compatible.
#ifndef PSC_COMMON_RECORDS_RECORD_FILES_H_
#define PSC_COMMON_RECORDS_RECORD_FILES_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/data/numpy_file.h"
#include "common/io/file_system.h"
#include "common/records/row_layout.h"
#include "common/tfrecord/compression.h"

namespace psc::records {

enum class FileFormat { kTfRecord, kCsv };
const char* FileFormatName(FileFormat format);

struct ReadOptions {
  FileFormat format = FileFormat::kTfRecord;
  std::optional<tfrecord::Compression> compression;  // none: detected per file
  uint64_t max_record_bytes = uint64_t{64} << 20;    // a record (a CSV row) at most
  bool skip_corrupt = false;
};

struct FileCount {
  std::string path;
  int64_t records = 0;  // read into the arrays
  int64_t skipped = 0;
  std::string first_skip;  // why the first was skipped
  // Streamed (PieceReader): the index of each record skipped, in the file.
  std::vector<int64_t> skipped_at;
};

struct SplitRead {
  std::map<std::string, data::NumpyArray> arrays;
  std::vector<FileCount> files;
  int64_t records = 0;
  int64_t skipped = 0;
};

// Reads `files` (in that order) into arrays named "x_<split>[/input]",
// "y_<split>" and "w_<split>" (split: "train", "val", "test"). Errors: the
// readers' (NOT_FOUND naming a missing file, DATA_LOSS and
// RESOURCE_EXHAUSTED naming the file and offset) and the row buffer's
// INVALID_ARGUMENT naming the record and feature, unless skip_corrupt; a
// CSV file whose header lacks a column of the spec (naming it and the
// header's columns), a row of another field count, a cell that is not a
// number of the column's kind (naming the file, line and column); a record
// that is not an Example (DATA_LOSS).
absl::StatusOr<SplitRead> ReadSplit(io::FileSystem* fs, const std::vector<std::string>& files,
                                    const RowLayout& layout, const ReadOptions& options,
                                    absl::string_view split);

// A file's records one at a time (ReadSplit's reader, and the streamed
// reader's: a shard's piece is Skip(first), then Next `count` times).
// Thread-compatible.
class RecordCursor {
 public:
  virtual ~RecordCursor() = default;
  // `layout` is not owned. ReadSplit's errors for the file's start (its
  // header, for CSV).
  static absl::StatusOr<std::unique_ptr<RecordCursor>> Open(
      std::unique_ptr<io::RandomAccessFile> file, const RowLayout* layout,
      const ReadOptions& options);
  // Steps over the next n records (TFRecord: each header checked, the data
  // not read; CSV: the rows split, not converted); *end when the file ends
  // first. Errors: the framing's (DATA_LOSS naming the file and offset).
  virtual absl::Status Skip(int64_t n, bool* end) = 0;
  // The next record into *rows (count->records) or, under skip_corrupt,
  // skipped (count->skipped; after damage that loses the rest of the file,
  // *end follows); *end at the file's end. ReadSplit's errors.
  virtual absl::Status Next(RowBuffer* rows, FileCount* count, bool* end) = 0;
  // Whether damage skipped under skip_corrupt lost the rest of the file.
  bool lost() const { return lost_; }

 protected:
  bool lost_ = false;
};

// One file already open (ReadSplit's step; fuzzing): its records appended
// to *rows and counted in *count, with ReadSplit's errors.
absl::Status ReadFileInto(std::unique_ptr<io::RandomAccessFile> file, const RowLayout& layout,
                          const ReadOptions& options, RowBuffer* rows, FileCount* count);

}  // namespace psc::records

#endif  // PSC_COMMON_RECORDS_RECORD_FILES_H_
