// The records of one TFRecord file (framing.h), plain or compressed, one
// at a time: what it holds is the record it last read, never more than the
// limit it was given, checked on the header before anything is allocated.
// Thread-compatible.
#ifndef PSC_COMMON_TFRECORD_RECORD_READER_H_
#define PSC_COMMON_TFRECORD_RECORD_READER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/io/file_system.h"
#include "common/tfrecord/byte_reader.h"
#include "common/tfrecord/compression.h"

namespace psc {
namespace tfrecord {

// --max_record_bytes's default: 64 MiB; and its largest value, 2 GiB - 1
// (what protobuf parses).
constexpr uint64_t kDefaultMaxRecordBytes = uint64_t{64} << 20;
constexpr uint64_t kMaxRecordBytesLimit = (uint64_t{1} << 31) - 1;

class RecordReader {
 public:
  // Opens `path` on `fs` (not owned). No `compression`: DetectCompression
  // on its first bytes. NOT_FOUND naming the path when it is missing;
  // INVALID_ARGUMENT for a max_record_bytes of 0 or over kMaxRecordBytesLimit.
  static absl::StatusOr<std::unique_ptr<RecordReader>> Open(
      io::FileSystem* fs, const std::string& path, std::optional<Compression> compression,
      uint64_t max_record_bytes = kDefaultMaxRecordBytes);
  // The same over a file already open.
  static absl::StatusOr<std::unique_ptr<RecordReader>> Open(
      std::unique_ptr<io::RandomAccessFile> file, std::optional<Compression> compression,
      uint64_t max_record_bytes = kDefaultMaxRecordBytes);

  // The next record into *record (its buffer reused); *end instead at a
  // clean end of the file. DATA_LOSS naming the file and the record's offset
  // (in the inflated stream for a compressed file) for a bad length CRC, a
  // bad data CRC, a truncated record or a damaged compressed stream;
  // RESOURCE_EXHAUSTED naming them for a length over max_record_bytes. After
  // an error every call returns it again, except after a bad data CRC
  // (skippable()), where the next call reads on.
  absl::Status Next(std::string* record, bool* end);

  // Steps over the next record as Next reads it, its header checked (the
  // length CRC, the limit) but not its data (a counting pass): what it
  // holds is one 64 KiB scratch buffer. *end at a clean end of the file;
  // Next's errors but the data CRC.
  absl::Status Skip(bool* end);

  // Whether the error Next last returned lost that record alone (a bad
  // data CRC: the framing is intact), so the next call reads the record
  // after it. Errors that lose the rest of the stream are returned again.
  bool skippable() const { return skippable_; }

  // Where the record Next last read (or failed on) starts.
  uint64_t record_offset() const { return record_offset_; }
  Compression compression() const { return bytes_->compression(); }
  const std::string& path() const { return bytes_->path(); }

 private:
  RecordReader(std::unique_ptr<ByteReader> bytes, uint64_t max_record_bytes)
      : bytes_(std::move(bytes)), max_record_bytes_(max_record_bytes) {}
  // The next record's header into *length (checked against the limit), or
  // *end; starts a record: its offset noted, skippable() cleared.
  absl::Status ReadHeader(uint64_t* length, bool* end);
  absl::Status Fail(absl::Status s);
  absl::Status Corrupt(absl::string_view what);

  const std::unique_ptr<ByteReader> bytes_;
  const uint64_t max_record_bytes_;
  uint64_t record_offset_ = 0;
  bool skippable_ = false;
  std::string scratch_;  // Skip's
  absl::Status failed_;
};

}  // namespace tfrecord
}  // namespace psc

#endif  // PSC_COMMON_TFRECORD_RECORD_READER_H_
