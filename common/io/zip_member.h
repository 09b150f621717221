// Reading and writing zip archives' members through minizip (Debian's
// libminizip-dev): .npz arrays (data/numpy_file.h) and .keras archives
// (keras/keras_archive.h). Sizes an archive announces are checked before
// anything is allocated: a deflated member can expand at most 1032x (zlib's
// limit), and never beyond the caller's bound.
#ifndef PSC_COMMON_IO_ZIP_MEMBER_H_
#define PSC_COMMON_IO_ZIP_MEMBER_H_

#include <unzip.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace psc {
namespace io {

// The most a deflated stream expands (zlib's theoretical limit).
inline constexpr uint64_t kMaxDeflateRatio = 1032;

// The member `z` is positioned on (unzGoToFirstFile / unzLocateFile), with
// its `info`, decompressed and CRC-checked: stored or deflated, at most
// `max_bytes`. DATA_LOSS naming `what` for an encrypted member, another
// compression method, a size over the bound or over what its compressed size
// can expand to, a stream that inflates to another size than announced, or
// a CRC mismatch.
absl::StatusOr<std::string> ReadZipMember(unzFile z, const unz_file_info64& info,
                                          uint64_t max_bytes, const std::string& what);

// Every member of the archive at `path` by name, each at most `max_bytes`.
// NOT_FOUND for a missing file; DATA_LOSS for anything that is not a valid
// zip archive, naming the file (and member).
absl::StatusOr<std::vector<std::pair<std::string, std::string>>> ReadZipFile(
    const std::string& path, uint64_t max_bytes);

struct ZipMemberToWrite {
  std::string name;
  const std::string* bytes;
  bool deflate = true;
};

// Writes the archive to `path` through a temporary file beside it and a
// rename, so that no reader sees half an archive (zip64 where needed).
// INTERNAL naming the path when a write fails; the temporary is removed.
absl::Status WriteZipFile(const std::string& path, const std::vector<ZipMemberToWrite>& members);

}  // namespace io
}  // namespace psc

#endif  // PSC_COMMON_IO_ZIP_MEMBER_H_
