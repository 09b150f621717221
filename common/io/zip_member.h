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

#include "absl/functional/function_ref.h"
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

// Opens the archive at `path` and calls visit(z, info, name) for each member
// in directory order, with `z` positioned on it, stopping at the first error
// visit returns. NOT_FOUND for a missing file; DATA_LOSS naming the file
// for anything that is not a zip archive, a corrupt or truncated directory,
// a member name of 1024 bytes or more, or two members of one name.
absl::Status ForEachZipMember(
    const std::string& path,
    absl::FunctionRef<absl::Status(unzFile, const unz_file_info64&, const std::string&)> visit);

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
