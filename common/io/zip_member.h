// Reading and writing zip archives' members through minizip (Debian's
// libminizip-dev): .npz arrays (data/numpy_file.h) and .keras archives
// (keras/keras_archive.h). Sizes an archive announces are checked before
// anything is allocated: a deflated member can expand at most 1032x (zlib's
// limit), and never beyond the caller's bound; and the bytes inflated so far
// are held to that bound while a member inflates.
#ifndef PSC_COMMON_IO_ZIP_MEMBER_H_
#define PSC_COMMON_IO_ZIP_MEMBER_H_

#include <unzip.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace psc {
namespace io {

// The most a deflated stream expands (zlib's theoretical limit).
inline constexpr uint64_t kMaxDeflateRatio = 1032;

// The member a zip archive is positioned on, inflated a piece at a time, so
// that a reader can learn how much to expect from the member's own first
// bytes (a .npy header's shape) and stop as soon as more comes out: memory
// follows the bytes inflated so far, never a size a file only announces.
// Thread-compatible; closes the member when destroyed.
class ZipMemberReader {
 public:
  // Opens the member `z` is positioned on (unzGoToFirstFile /
  // unzLocateFile), with its `info`. DATA_LOSS naming `what` for an
  // encrypted member, a compression method other than stored and deflate,
  // or one minizip cannot open.
  static absl::StatusOr<std::unique_ptr<ZipMemberReader>> Open(unzFile z,
                                                               const unz_file_info64& info,
                                                               std::string what);
  ~ZipMemberReader();
  ZipMemberReader(const ZipMemberReader&) = delete;
  ZipMemberReader& operator=(const ZipMemberReader&) = delete;

  // Appends up to `n` more bytes of the member to `out` (fewer only at its
  // end). DATA_LOSS when the stream is corrupt.
  absl::Status Read(uint64_t n, std::string* out);
  // Appends the rest, stopping as soon as the member's bytes inflated so far
  // pass `declared` in all: then DATA_LOSS "<what>: inflated past the
  // declared <declared> bytes (<why>)". At the end, DATA_LOSS if the member
  // holds other than its zip entry announces or fails its CRC.
  absl::Status ReadRest(uint64_t declared, const std::string& why, std::string* out);

  uint64_t inflated() const { return inflated_; }

 private:
  ZipMemberReader(unzFile z, const unz_file_info64& info, std::string what)
      : z_(z), info_(info), what_(std::move(what)) {}

  unzFile z_;
  const unz_file_info64 info_;
  const std::string what_;
  uint64_t inflated_ = 0;
  bool open_ = false;
};

// The member `z` is positioned on, with its `info`, decompressed and
// CRC-checked: stored or deflated, at most `limit` bytes, `why` naming
// where the limit comes from ("config.json's cap"). A zip entry that
// announces more, or more than its compressed size can expand to, is
// DATA_LOSS "<what>: would be inflated past the declared <limit> bytes
// (<why>; its zip entry announces N)" before anything is inflated; the
// stream is held to the same limit as it inflates (ReadRest). DATA_LOSS
// naming `what` for the errors of ZipMemberReader.
absl::StatusOr<std::string> ReadZipMember(unzFile z, const unz_file_info64& info, uint64_t limit,
                                          const std::string& why, const std::string& what);

// Opens the archive at `path` and calls visit(z, info, name) for each member
// in directory order, with `z` positioned on it, stopping at the first error
// visit returns. NOT_FOUND for a missing file; DATA_LOSS naming the file
// for anything that is not a zip archive, a corrupt or truncated directory,
// a member name of 1024 bytes or more, or two members of one name.
absl::Status ForEachZipMember(
    const std::string& path,
    absl::FunctionRef<absl::Status(unzFile, const unz_file_info64&, const std::string&)> visit);

// Every member of the archive at `path` by name, each at most `max_bytes`
// (ReadZipMember). NOT_FOUND for a missing file; DATA_LOSS for anything that
// is not a valid zip archive, naming the file (and member).
absl::StatusOr<std::vector<std::pair<std::string, std::string>>> ReadZipFile(
    const std::string& path, uint64_t max_bytes);

struct ZipMemberToWrite {
  std::string name;
  const std::string* bytes;  // or null: the member is the file `file`
  bool deflate = true;
  std::string file;  // copied a piece at a time, never whole in memory
};

// Writes the archive to `path` through a temporary file beside it and a
// rename, so that no reader sees half an archive (zip64 where needed).
// INTERNAL naming the path when a write fails, NOT_FOUND naming a member's
// file that cannot be opened; the temporary is removed.
absl::Status WriteZipFile(const std::string& path, const std::vector<ZipMemberToWrite>& members);

}  // namespace io
}  // namespace psc

#endif  // PSC_COMMON_IO_ZIP_MEMBER_H_
