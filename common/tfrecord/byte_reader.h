// A file's bytes in order, inflated when it is gzip or zlib compressed, a
// chunk at a time: what a reader holds is its input chunk (64 KiB) and
// the inflater's state (about 87 KiB), whatever the file's size or what it inflates to. Each
// Read gives at most what its caller asked for, so a stream that inflates
// without end (a bomb) costs time, never memory. Thread-compatible.
#ifndef PSC_COMMON_TFRECORD_BYTE_READER_H_
#define PSC_COMMON_TFRECORD_BYTE_READER_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/io/file_system.h"
#include "common/tfrecord/compression.h"

namespace psc {
namespace tfrecord {

class ByteReader {
 public:
  // Reads `file` from its start, inflating it as `compression` says.
  static absl::StatusOr<std::unique_ptr<ByteReader>> Open(
      std::unique_ptr<io::RandomAccessFile> file, Compression compression);
  virtual ~ByteReader() = default;

  // Up to `n` bytes into `out`: fewer only at the end of the (inflated)
  // stream. DATA_LOSS naming the file for a damaged or truncated compressed
  // stream (a gzip file may hold several members, read in turn); the
  // file's own errors as io::RandomAccessFile::Read gives them.
  virtual absl::StatusOr<size_t> Read(char* out, size_t n) = 0;

  // The bytes Read has given so far (offsets in the inflated stream).
  uint64_t position() const { return position_; }
  const std::string& path() const { return file_->path(); }
  Compression compression() const { return compression_; }

 protected:
  ByteReader(std::unique_ptr<io::RandomAccessFile> file, Compression compression)
      : file_(std::move(file)), compression_(compression) {}

  const std::unique_ptr<io::RandomAccessFile> file_;
  const Compression compression_;
  uint64_t position_ = 0;
};

}  // namespace tfrecord
}  // namespace psc

#endif  // PSC_COMMON_TFRECORD_BYTE_READER_H_
