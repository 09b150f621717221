// The rows of a CSV file as RFC 4180 writes them: fields separated by
// commas, rows by CRLF or LF, a field in double quotes holding commas,
// line breaks and "" for a quote; plain or gzip compressed (detected by
// its magic bytes), or zlib when given. Empty lines are skipped. A row is at most
// max_row_bytes, checked as it is read. Thread-compatible.
#ifndef PSC_COMMON_RECORDS_CSV_READER_H_
#define PSC_COMMON_RECORDS_CSV_READER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/io/file_system.h"
#include "common/tfrecord/byte_reader.h"
#include "common/tfrecord/compression.h"

namespace psc::records {

class CsvReader {
 public:
  // NOT_FOUND naming a missing file; INVALID_ARGUMENT for max_row_bytes 0.
  static absl::StatusOr<std::unique_ptr<CsvReader>> Open(
      io::FileSystem* fs, const std::string& path, std::optional<tfrecord::Compression> compression,
      uint64_t max_row_bytes);
  // The same over a file already open.
  static absl::StatusOr<std::unique_ptr<CsvReader>> Open(
      std::unique_ptr<io::RandomAccessFile> file, std::optional<tfrecord::Compression> compression,
      uint64_t max_row_bytes);

  // The next row's fields into *fields; *end instead at the end of the file.
  // INVALID_ARGUMENT naming the file and line for: a quote inside an
  // unquoted field, text after a closing quote, a quoted field the file
  // ends in; RESOURCE_EXHAUSTED naming them for a row over max_row_bytes;
  // the stream's DATA_LOSS. After an error every call returns it again.
  absl::Status Next(std::vector<std::string>* fields, bool* end);

  // The line the row Next last read starts on (1 for the first).
  int64_t line() const { return row_line_; }
  const std::string& path() const { return bytes_->path(); }

 private:
  CsvReader(std::unique_ptr<tfrecord::ByteReader> bytes, uint64_t max_row_bytes)
      : bytes_(std::move(bytes)), max_row_bytes_(max_row_bytes) {}
  // The next byte into *c; false at the end of the stream.
  absl::StatusOr<bool> Get(char* c);
  absl::Status Fail(absl::Status s);

  const std::unique_ptr<tfrecord::ByteReader> bytes_;
  const uint64_t max_row_bytes_;
  std::string buffer_;
  size_t pos_ = 0;
  int64_t line_ = 1;  // where the next byte is
  int64_t row_line_ = 0;
  absl::Status failed_;
};

}  // namespace psc::records

#endif  // PSC_COMMON_RECORDS_CSV_READER_H_
