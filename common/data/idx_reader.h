// Reads IDX files (the MNIST / Fashion-MNIST container format), gzip-compressed or raw.
//
// Format (all integers big-endian): two zero bytes, a type byte, a byte ndim, ndim uint32
// dimensions, then product(dims) elements in row-major order. Only type 0x08 (unsigned byte) is
// supported, with 1 to 4 dimensions; that covers the image and label files of MNIST and
// Fashion-MNIST.
#ifndef PSC_COMMON_DATA_IDX_READER_H_
#define PSC_COMMON_DATA_IDX_READER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace psc::data {

// The contents of an unsigned-byte IDX file.
struct IdxArray {
  std::vector<int> dims;      // 1 to 4 entries, each >= 1.
  std::vector<uint8_t> data;  // product(dims) bytes, row-major.
};

// The largest data section ReadIdxFile accepts: product(dims) must not exceed 1 GiB.
inline constexpr int64_t kMaxIdxDataBytes = int64_t{1} << 30;

// Reads the IDX file at `path`. The file may be gzip-compressed or raw (zlib's gzread reads both).
// Blocks on file I/O. Thread-safe (no shared state).
//
// Errors, each naming `path`:
//   NOT_FOUND         the file does not exist.
//   PERMISSION_DENIED the file exists but may not be read.
//   INVALID_ARGUMENT  not a regular file; a corrupt or truncated gzip stream; a header shorter than
//                     4 + 4 * ndim bytes; a magic other than 0x0000; a type other than 0x08; ndim 0
//                     or above 4; a zero dimension; dimensions whose product exceeds
//                     kMaxIdxDataBytes; fewer data bytes than the header announces; bytes after the
//                     data.
absl::StatusOr<IdxArray> ReadIdxFile(const std::string& path);

}  // namespace psc::data

#endif  // PSC_COMMON_DATA_IDX_READER_H_
