#include "common/data/idx_reader.h"

#include <sys/stat.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "common/base/checked_size.h"
#include "common/base/status_macros.h"

namespace psc::data {
namespace {

constexpr uint8_t kTypeUnsignedByte = 0x08;
constexpr int kMaxDims = 4;
// gzread takes an unsigned length and returns an int: read at most this much per call.
constexpr int64_t kMaxChunk = int64_t{1} << 28;

// Closes the gzFile on destruction.
class GzFile {
 public:
  explicit GzFile(gzFile file) : file_(file) {}
  GzFile(const GzFile&) = delete;
  GzFile& operator=(const GzFile&) = delete;
  ~GzFile() {
    if (file_ != nullptr) gzclose(file_);
  }
  gzFile get() const { return file_; }

 private:
  gzFile file_;
};

absl::Status Invalid(const std::string& path, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("IDX file ", path, ": ", what));
}

// Reads up to `n` bytes into `buf`, stopping early only at the end of the stream. Returns the
// number of bytes read, or INVALID_ARGUMENT if zlib reports a corrupt or unreadable stream.
absl::StatusOr<int64_t> ReadUpTo(gzFile file, uint8_t* buf, int64_t n, const std::string& path) {
  int64_t total = 0;
  while (total < n) {
    const auto chunk = static_cast<unsigned>(std::min(n - total, kMaxChunk));
    const int got = gzread(file, buf + total, chunk);
    if (got <= 0) {
      // gzread returns 0 both at a clean end and at a gzip stream cut short (Z_BUF_ERROR,
      // "unexpected end of file"); gzerror tells them apart.
      int errnum = Z_OK;
      const char* message = gzerror(file, &errnum);
      if (got == 0 && errnum == Z_OK) break;
      absl::string_view detail = errnum == Z_ERRNO ? std::strerror(errno) : message;
      absl::ConsumePrefix(&detail, absl::StrCat(path, ": "));  // zlib prefixes the path.
      return Invalid(path, absl::StrCat("corrupt or unreadable gzip stream: ", detail));
    }
    total += got;
  }
  return total;
}

uint32_t BigEndian32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

}  // namespace

absl::StatusOr<IdxArray> ReadIdxFile(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    const int err = errno;
    if (err == ENOENT || err == ENOTDIR) {
      return absl::NotFoundError(absl::StrCat("IDX file ", path, ": not found"));
    }
    if (err == EACCES) {
      return absl::PermissionDeniedError(absl::StrCat("IDX file ", path, ": ", std::strerror(err)));
    }
    return Invalid(path, std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) return Invalid(path, "not a regular file");

  GzFile file(gzopen(path.c_str(), "rb"));
  if (file.get() == nullptr) {
    const int err = errno;
    const std::string message =
        absl::StrCat("IDX file ", path, ": cannot open: ", err != 0 ? std::strerror(err) : "?");
    if (err == EACCES) return absl::PermissionDeniedError(message);
    return absl::InvalidArgumentError(message);
  }
  gzbuffer(file.get(), 1 << 20);

  // Magic: 0x00 0x00 type ndim.
  uint8_t magic[4];
  PSC_ASSIGN_OR_RETURN(int64_t got, ReadUpTo(file.get(), magic, 4, path));
  if (got < 4) {
    return Invalid(path, absl::StrCat("header too short: need at least 4 bytes, file has ", got));
  }
  if (magic[0] != 0 || magic[1] != 0) {
    return Invalid(path, absl::StrFormat("bad magic 0x%02x%02x (want 0x0000 then type 0x%02x)",
                                         magic[0], magic[1], kTypeUnsignedByte));
  }
  if (magic[2] != kTypeUnsignedByte) {
    return Invalid(path, absl::StrFormat("unsupported element type 0x%02x (only 0x%02x, unsigned "
                                         "byte, is supported)",
                                         magic[2], kTypeUnsignedByte));
  }
  const int ndim = magic[3];
  if (ndim < 1 || ndim > kMaxDims) {
    return Invalid(path, absl::StrCat("unsupported number of dimensions ", ndim, " (want 1 to ",
                                      kMaxDims, ")"));
  }

  uint8_t dim_bytes[4 * kMaxDims];
  PSC_ASSIGN_OR_RETURN(got, ReadUpTo(file.get(), dim_bytes, 4 * ndim, path));
  if (got < 4 * ndim) {
    return Invalid(path, absl::StrCat("header too short: need ", 4 + 4 * ndim, " bytes for ", ndim,
                                      " dimensions, file has ", 4 + got));
  }

  IdxArray out;
  std::vector<int64_t> dims;
  for (int i = 0; i < ndim; ++i) {
    const uint32_t dim = BigEndian32(dim_bytes + 4 * i);
    if (dim == 0) return Invalid(path, absl::StrCat("dimension ", i, " is zero"));
    dims.push_back(dim);
    out.dims.push_back(static_cast<int>(dim));
  }
  absl::StatusOr<uint64_t> checked = base::ByteSize(
      dims, 1, kMaxIdxDataBytes, absl::StrCat("dimensions ", absl::StrJoin(dims, "x")));
  if (!checked.ok()) return Invalid(path, checked.status().message());
  const int64_t size = static_cast<int64_t>(*checked);

  out.data.resize(static_cast<size_t>(size));
  PSC_ASSIGN_OR_RETURN(got, ReadUpTo(file.get(), out.data.data(), size, path));
  if (got < size) {
    return Invalid(path, absl::StrCat("truncated: header says ", size, " bytes of data, file has ",
                                      got, " (dimensions ", absl::StrJoin(out.dims, "x"), ")"));
  }

  // Anything after the data is an error; count it (up to the data limit) for the message.
  uint8_t scratch[1 << 16];
  int64_t trailing = 0;
  while (trailing < kMaxIdxDataBytes) {
    PSC_ASSIGN_OR_RETURN(got, ReadUpTo(file.get(), scratch, sizeof(scratch), path));
    if (got == 0) break;
    trailing += got;
  }
  if (trailing > 0) {
    return Invalid(path, absl::StrCat(trailing >= kMaxIdxDataBytes ? "at least " : "", trailing,
                                      " trailing bytes after the ", size, " bytes of data"));
  }
  return out;
}

}  // namespace psc::data
