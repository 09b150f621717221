#include "common/tfrecord/record_reader.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"
#include "common/tfrecord/framing.h"

namespace psc {
namespace tfrecord {

absl::StatusOr<std::unique_ptr<RecordReader>> RecordReader::Open(
    io::FileSystem* fs, const std::string& path, std::optional<Compression> compression,
    uint64_t max_record_bytes) {
  PSC_ASSIGN_OR_RETURN(std::unique_ptr<io::RandomAccessFile> file, fs->OpenForRead(path));
  return Open(std::move(file), compression, max_record_bytes);
}

absl::StatusOr<std::unique_ptr<RecordReader>> RecordReader::Open(
    std::unique_ptr<io::RandomAccessFile> file, std::optional<Compression> compression,
    uint64_t max_record_bytes) {
  if (max_record_bytes == 0 || max_record_bytes > kMaxRecordBytesLimit) {
    return absl::InvalidArgumentError(absl::StrCat("--max_record_bytes=", max_record_bytes,
                                                   ": want 1 to ", kMaxRecordBytesLimit));
  }
  if (!compression.has_value()) {
    char prefix[kHeaderBytes];
    const size_t n = static_cast<size_t>(std::min<uint64_t>(sizeof(prefix), file->size()));
    if (n > 0) PSC_RETURN_IF_ERROR(file->Read(0, n, prefix));
    compression = DetectCompression(absl::string_view(prefix, n));
  }
  PSC_ASSIGN_OR_RETURN(std::unique_ptr<ByteReader> bytes,
                       ByteReader::Open(std::move(file), *compression));
  return std::unique_ptr<RecordReader>(new RecordReader(std::move(bytes), max_record_bytes));
}

absl::Status RecordReader::ReadHeader(uint64_t* length, bool* end) {
  *end = false;
  skippable_ = false;
  if (!failed_.ok()) return failed_;
  record_offset_ = bytes_->position();
  char header[kHeaderBytes];
  absl::StatusOr<size_t> got = bytes_->Read(header, sizeof(header));
  if (!got.ok()) return Fail(got.status());
  if (*got == 0) {
    *end = true;
    return absl::OkStatus();
  }
  if (*got < sizeof(header)) return Corrupt("truncated record header");
  if (!DecodeHeader(header, length)) return Corrupt("bad length CRC");
  if (*length > max_record_bytes_) {
    return Fail(absl::ResourceExhaustedError(
        absl::StrCat(path(), ": a record of ", *length, " bytes at offset ", record_offset_,
                     " is over --max_record_bytes=", max_record_bytes_)));
  }
  return absl::OkStatus();
}

absl::Status RecordReader::Next(std::string* record, bool* end) {
  uint64_t length = 0;
  PSC_RETURN_IF_ERROR(ReadHeader(&length, end));
  if (*end) return absl::OkStatus();
  // length <= max_record_bytes: the buffer is allocated only now.
  record->resize(static_cast<size_t>(length) + kFooterBytes);
  absl::StatusOr<size_t> got = bytes_->Read(record->data(), record->size());
  if (!got.ok()) return Fail(got.status());
  if (*got < record->size()) {
    return Corrupt(absl::StrCat("truncated record (length ", length, ", ", *got,
                                " bytes of it and its CRC left in the file)"));
  }
  if (!FooterMatches(record->data() + length, absl::string_view(record->data(), length))) {
    absl::Status s = Corrupt("bad data CRC");
    failed_ = absl::OkStatus();  // the next record is where the framing says
    skippable_ = true;
    return s;
  }
  record->resize(static_cast<size_t>(length));
  return absl::OkStatus();
}

absl::Status RecordReader::Skip(bool* end) {
  uint64_t length = 0;
  PSC_RETURN_IF_ERROR(ReadHeader(&length, end));
  if (*end) return absl::OkStatus();
  scratch_.resize(64 << 10);
  uint64_t left = length + kFooterBytes;
  while (left > 0) {
    const size_t want = static_cast<size_t>(std::min<uint64_t>(left, scratch_.size()));
    absl::StatusOr<size_t> got = bytes_->Read(scratch_.data(), want);
    if (!got.ok()) return Fail(got.status());
    if (*got < want) {
      return Corrupt(absl::StrCat("truncated record (length ", length, ", ",
                                  length + kFooterBytes - left + *got,
                                  " bytes of it and its CRC left in the file)"));
    }
    left -= want;
  }
  return absl::OkStatus();
}

absl::Status RecordReader::Fail(absl::Status s) {
  failed_ = s;
  return s;
}

absl::Status RecordReader::Corrupt(absl::string_view what) {
  return Fail(absl::DataLossError(absl::StrCat(
      path(), ": ", what, " in the record at offset ", record_offset_,
      compression() == Compression::kNone
          ? ""
          : absl::StrCat(" of the inflated ", CompressionName(compression()), " stream"))));
}

}  // namespace tfrecord
}  // namespace psc
