#include "common/data/numpy_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <unzip.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/base/checked_size.h"
#include "common/base/status_macros.h"
#include "common/io/zip_member.h"

namespace psc::data {

// Builds NumpyArrays (the one friend of the class).
class NumpyArrayMaker {
 public:
  static NumpyArray Make(NpyHeader header, std::shared_ptr<const void> storage, const void* data,
                         bool mapped) {
    NumpyArray a;
    a.header_ = std::move(header);
    a.storage_ = std::move(storage);
    a.data_ = data;
    a.mapped_ = mapped;
    return a;
  }
};

namespace {

// A read-only file descriptor, closed on destruction.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

absl::StatusOr<uint64_t> FileSize(const std::string& path, int* fd_out) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int e = errno;
    if (e == ENOENT) return absl::NotFoundError(absl::StrCat(path, ": no such file"));
    return absl::PermissionDeniedError(absl::StrCat(path, ": ", std::strerror(e)));
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a regular file"));
  }
  *fd_out = fd;
  return static_cast<uint64_t>(st.st_size);
}

// Maps bytes [offset, offset + length) of `fd` (within the file: checked by
// the caller); the pointer to `offset` and the mapping's owner.
absl::StatusOr<std::pair<const char*, std::shared_ptr<const void>>> Map(int fd, uint64_t offset,
                                                                        uint64_t length,
                                                                        const std::string& what) {
  static const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  if (length == 0) {
    static const char kEmpty = 0;
    return std::make_pair(&kEmpty, std::shared_ptr<const void>());
  }
  const uint64_t start = offset / page * page;
  const uint64_t span = offset - start + length;
  void* p = mmap(nullptr, span, PROT_READ, MAP_PRIVATE, fd, static_cast<off_t>(start));
  if (p == MAP_FAILED) {
    return absl::ResourceExhaustedError(absl::StrCat(what, ": mmap: ", std::strerror(errno)));
  }
  std::shared_ptr<const void> owner(p,
                                    [span](const void* q) { munmap(const_cast<void*>(q), span); });
  return std::make_pair(static_cast<const char*>(p) + (offset - start), std::move(owner));
}

// The header of a .npy that starts at `bytes` (`available` of them readable),
// whose whole length must be `total` bytes.
absl::StatusOr<NpyHeader> HeaderOf(const char* bytes, uint64_t available, uint64_t total,
                                   const std::string& what) {
  PSC_ASSIGN_OR_RETURN(
      NpyHeader h, ParseNpyHeader(absl::string_view(bytes, static_cast<size_t>(available)), what,
                                  kMaxNumpyArrayBytes));
  if (auto end = base::CheckedAdd(h.data_offset, h.data_bytes); !end || *end != total) {
    return absl::DataLossError(absl::StrCat(what, ": the header says ", h.Text(), " (",
                                            h.data_offset, " + ", h.data_bytes,
                                            " bytes) but the array is ", total, " bytes"));
  }
  return h;
}

absl::StatusOr<NumpyArray> ReadMember(unzFile z, int fd, uint64_t file_size,
                                      const unz_file_info64& info, const std::string& what) {
  if (info.compression_method != 0 || (info.flag & 1)) {
    // Deflated (or not readable at all): into memory, bounded by what the
    // .npy header declares, which is read first: the rest is inflated only
    // as far as the header's shape says, whatever the zip entry announces.
    PSC_ASSIGN_OR_RETURN(std::unique_ptr<io::ZipMemberReader> reader,
                         io::ZipMemberReader::Open(z, info, what));
    std::string bytes;
    PSC_RETURN_IF_ERROR(reader->Read(kNpyPreambleBytes + kMaxNpyHeaderBytes, &bytes));
    PSC_ASSIGN_OR_RETURN(
        NpyHeader h, ParseNpyHeader(bytes, what, kMaxNumpyArrayBytes));  // DATA_LOSS if truncated
    const std::optional<uint64_t> total = base::CheckedAdd(h.data_offset, h.data_bytes);
    if (!total) return absl::DataLossError(absl::StrCat(what, ": the header's size overflows"));
    PSC_RETURN_IF_ERROR(
        reader->ReadRest(*total, absl::StrCat("its .npy header: ", h.Text()), &bytes));
    auto owned = std::make_shared<const std::string>(std::move(bytes));
    // Exactly the header's bytes, not fewer.
    PSC_ASSIGN_OR_RETURN(h, HeaderOf(owned->data(), owned->size(), owned->size(), what));
    const char* data = owned->data() + h.data_offset;
    return NumpyArrayMaker::Make(std::move(h), owned, data, false);
  }
  if (int rc = unzOpenCurrentFile(z); rc != UNZ_OK) {
    return absl::DataLossError(absl::StrCat(what, ": cannot open the member (", rc, ")"));
  }
  // Stored: the .npy lies in the file as it is; map it.
  absl::StatusOr<NumpyArray> result;
  const uint64_t pos = unzGetCurrentFileZStreamPos64(z);
  const uint64_t size = info.uncompressed_size;
  const auto end = base::CheckedAdd(pos, size);
  if (size != info.compressed_size || !end || *end > file_size) {
    result = absl::DataLossError(absl::StrCat(what, ": a stored member of ", size, " bytes at ",
                                              pos, " does not fit the ", file_size, "-byte file"));
  } else {
    auto mapped = Map(fd, pos, size, what);
    if (!mapped.ok()) {
      result = mapped.status();
    } else {
      auto [bytes, owner] = *std::move(mapped);
      auto h = HeaderOf(bytes, size, size, what);
      if (!h.ok()) {
        result = h.status();
      } else {
        const char* data = bytes + h->data_offset;
        result = NumpyArrayMaker::Make(*std::move(h), std::move(owner), data, true);
      }
    }
  }
  unzCloseCurrentFile(z);  // a stored member's CRC would need every page read: not checked
  return result;
}

}  // namespace

void NumpyArray::ReleasePages(uint64_t offset, uint64_t bytes) const {
  if (!mapped_ || bytes == 0) return;
  const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  const uint64_t begin = reinterpret_cast<uintptr_t>(data_) + offset;
  // Outward: the mapping starts at the page of data()'s first byte and ends
  // at the page holding its last.
  const uint64_t first = begin / page * page, last = (begin + bytes + page - 1) / page * page;
  if (last > first) madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
}

absl::StatusOr<NumpyArray> NumpyArray::FromElements(NpyType type, std::vector<int64_t> shape,
                                                    std::string elements) {
  PSC_ASSIGN_OR_RETURN(uint64_t bytes,
                       base::ByteSize(shape, NpyTypeSize(type), kMaxNumpyArrayBytes, "array"));
  if (bytes != elements.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(elements.size(), " bytes for ", bytes, " bytes of elements"));
  }
  NpyHeader h;
  h.type = type;
  h.shape = std::move(shape);
  h.data_bytes = bytes;
  h.count = static_cast<int64_t>(bytes / NpyTypeSize(type));
  h.data_offset = 0;
  auto owned = std::make_shared<const std::string>(std::move(elements));
  const char* data = owned->data();
  return NumpyArrayMaker::Make(std::move(h), std::move(owned), data, false);
}

absl::StatusOr<NumpyArray> ReadNpyFile(const std::string& path) {
  int raw = -1;
  PSC_ASSIGN_OR_RETURN(uint64_t size, FileSize(path, &raw));
  Fd fd(raw);
  PSC_ASSIGN_OR_RETURN(auto mapped, Map(fd.get(), 0, size, path));
  auto [bytes, owner] = std::move(mapped);
  PSC_ASSIGN_OR_RETURN(NpyHeader h, HeaderOf(bytes, size, size, path));
  const char* data = bytes + h.data_offset;
  return NumpyArrayMaker::Make(std::move(h), std::move(owner), data, true);
}

absl::StatusOr<std::map<std::string, NpyHeader>> ReadNpzHeaders(const std::string& path) {
  std::map<std::string, NpyHeader> headers;
  PSC_RETURN_IF_ERROR(io::ForEachZipMember(
      path, [&](unzFile z, const unz_file_info64& info, const std::string& member) -> absl::Status {
        if (!absl::EndsWith(member, ".npy")) return absl::OkStatus();
        const std::string what = absl::StrCat(path, ": ", member);
        PSC_ASSIGN_OR_RETURN(std::unique_ptr<io::ZipMemberReader> reader,
                             io::ZipMemberReader::Open(z, info, what));
        std::string bytes;
        PSC_RETURN_IF_ERROR(reader->Read(kNpyPreambleBytes + kMaxNpyHeaderBytes, &bytes));
        PSC_ASSIGN_OR_RETURN(NpyHeader h, ParseNpyHeader(bytes, what, kMaxNumpyArrayBytes));
        headers.emplace(member.substr(0, member.size() - 4), std::move(h));
        return absl::OkStatus();
      }));
  return headers;
}

absl::StatusOr<std::map<std::string, NumpyArray>> ReadNpzFile(const std::string& path) {
  int raw = -1;
  PSC_ASSIGN_OR_RETURN(uint64_t file_size, FileSize(path, &raw));
  Fd fd(raw);
  std::map<std::string, NumpyArray> arrays;
  PSC_RETURN_IF_ERROR(io::ForEachZipMember(
      path, [&](unzFile z, const unz_file_info64& info, const std::string& member) -> absl::Status {
        if (!absl::EndsWith(member, ".npy")) return absl::OkStatus();
        PSC_ASSIGN_OR_RETURN(NumpyArray a, ReadMember(z, fd.get(), file_size, info,
                                                      absl::StrCat(path, ": ", member)));
        arrays.emplace(member.substr(0, member.size() - 4), std::move(a));
        return absl::OkStatus();
      }));
  return arrays;
}

}  // namespace psc::data
