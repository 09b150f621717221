#include "common/io/zip_member.h"

#include <sys/stat.h>
#include <unistd.h>
#include <zip.h>

#include <algorithm>
#include <cstdio>
#include <set>

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"

namespace psc {
namespace io {
namespace {

constexpr size_t kReadChunk = size_t{1} << 20;

// The member, read: at most `expected` bytes, growing with what arrives.
absl::StatusOr<std::string> Inflate(unzFile z, uint64_t expected, const std::string& what) {
  std::string out;
  while (true) {
    const size_t old = out.size();
    const uint64_t room = expected - old;
    out.resize(old + static_cast<size_t>(std::min<uint64_t>(kReadChunk, room + 1)));
    const int n = unzReadCurrentFile(z, out.data() + old, static_cast<unsigned>(out.size() - old));
    if (n < 0) return absl::DataLossError(absl::StrCat(what, ": cannot inflate (", n, ")"));
    out.resize(old + static_cast<size_t>(n));
    if (n == 0) break;
    if (out.size() > expected) {
      return absl::DataLossError(
          absl::StrCat(what, ": more than the ", expected, " bytes its zip entry announces"));
    }
  }
  if (out.size() != expected) {
    return absl::DataLossError(
        absl::StrCat(what, ": ", out.size(), " bytes, its zip entry says ", expected));
  }
  return out;
}

}  // namespace

absl::StatusOr<std::string> ReadZipMember(unzFile z, const unz_file_info64& info,
                                          uint64_t max_bytes, const std::string& what) {
  if (info.flag & 1) {
    return absl::DataLossError(absl::StrCat(what, ": encrypted members are not supported"));
  }
  if (info.compression_method != 0 && info.compression_method != Z_DEFLATED) {
    return absl::DataLossError(absl::StrCat(what, ": compression method ", info.compression_method,
                                            " (only stored and deflate are supported)"));
  }
  uint64_t bound = max_bytes;
  if (info.compression_method == 0) {
    bound = std::min<uint64_t>(bound, info.compressed_size);
  } else if (info.compressed_size < ~uint64_t{0} / kMaxDeflateRatio) {
    bound = std::min<uint64_t>(bound, info.compressed_size * kMaxDeflateRatio);
  }
  if (info.uncompressed_size > bound) {
    return absl::DataLossError(absl::StrCat(what, ": announces ", info.uncompressed_size,
                                            " bytes from ", info.compressed_size,
                                            " compressed (at most ", bound, ")"));
  }
  if (int rc = unzOpenCurrentFile(z); rc != UNZ_OK) {
    return absl::DataLossError(absl::StrCat(what, ": cannot open the member (", rc, ")"));
  }
  absl::StatusOr<std::string> bytes = Inflate(z, info.uncompressed_size, what);
  const int closed = unzCloseCurrentFile(z);
  if (bytes.ok() && closed == UNZ_CRCERROR) {
    return absl::DataLossError(absl::StrCat(what, ": CRC mismatch"));
  }
  return bytes;
}

absl::Status ForEachZipMember(
    const std::string& path,
    absl::FunctionRef<absl::Status(unzFile, const unz_file_info64&, const std::string&)> visit) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0)
    return absl::NotFoundError(absl::StrCat(path, ": no such file"));
  unzFile z = unzOpen64(path.c_str());
  if (z == nullptr) {
    return absl::DataLossError(absl::StrCat(path, ": not a zip archive, or a corrupt one"));
  }
  absl::Status status;
  std::set<std::string> seen;
  int rc = unzGoToFirstFile(z);
  const char* call = "unzGoToFirstFile";
  while (rc == UNZ_OK) {
    unz_file_info64 info;
    char name[1024];
    if (int got = unzGetCurrentFileInfo64(z, &info, name, sizeof(name), nullptr, 0, nullptr, 0);
        got != UNZ_OK) {
      rc = got;
      call = "unzGetCurrentFileInfo64";
      break;
    }
    if (info.size_filename >= sizeof(name)) {
      status = absl::DataLossError(
          absl::StrCat(path, ": a member name of ", info.size_filename, " bytes"));
      break;
    }
    const std::string member(name, info.size_filename);
    if (!seen.insert(member).second) {
      status = absl::DataLossError(absl::StrCat(path, ": ", member, ": two members of this name"));
      break;
    }
    status = visit(z, info, member);
    if (!status.ok()) break;
    rc = unzGoToNextFile(z);
    call = "unzGoToNextFile";
  }
  if (status.ok() && rc != UNZ_END_OF_LIST_OF_FILE) {
    status = absl::DataLossError(
        absl::StrCat(path, ": corrupt or truncated zip archive (", call, " returned ", rc, ")"));
  }
  unzClose(z);
  return status;
}

absl::StatusOr<std::vector<std::pair<std::string, std::string>>> ReadZipFile(
    const std::string& path, uint64_t max_bytes) {
  std::vector<std::pair<std::string, std::string>> members;
  PSC_RETURN_IF_ERROR(ForEachZipMember(
      path, [&](unzFile z, const unz_file_info64& info, const std::string& name) -> absl::Status {
        PSC_ASSIGN_OR_RETURN(std::string bytes,
                             ReadZipMember(z, info, max_bytes, absl::StrCat(path, ": ", name)));
        members.emplace_back(name, std::move(bytes));
        return absl::OkStatus();
      }));
  return members;
}

absl::Status WriteZipFile(const std::string& path, const std::vector<ZipMemberToWrite>& members) {
  const std::string temp = absl::StrCat(path, ".tmp-", getpid());
  zipFile zf = zipOpen64(temp.c_str(), APPEND_STATUS_CREATE);
  if (zf == nullptr) return absl::InternalError(absl::StrCat("cannot create ", temp));
  absl::Status status;
  for (const ZipMemberToWrite& m : members) {
    zip_fileinfo zi = {};
    const int method = m.deflate ? Z_DEFLATED : 0;
    const int level = m.deflate ? Z_DEFAULT_COMPRESSION : 0;
    if (zipOpenNewFileInZip64(zf, m.name.c_str(), &zi, nullptr, 0, nullptr, 0, nullptr, method,
                              level, /*zip64=*/m.bytes->size() >= 0xffffffffu) != ZIP_OK) {
      status = absl::InternalError(absl::StrCat(path, ": cannot add ", m.name));
      break;
    }
    for (size_t off = 0; off < m.bytes->size() && status.ok(); off += kReadChunk) {
      const size_t n = std::min(kReadChunk, m.bytes->size() - off);
      if (zipWriteInFileInZip(zf, m.bytes->data() + off, static_cast<unsigned>(n)) != ZIP_OK) {
        status = absl::InternalError(absl::StrCat(path, ": cannot write ", m.name));
      }
    }
    if (zipCloseFileInZip(zf) != ZIP_OK && status.ok()) {
      status = absl::InternalError(absl::StrCat(path, ": cannot finish ", m.name));
    }
    if (!status.ok()) break;
  }
  if (zipClose(zf, nullptr) != ZIP_OK && status.ok()) {
    status = absl::InternalError(absl::StrCat(path, ": cannot finish the archive"));
  }
  if (status.ok() && std::rename(temp.c_str(), path.c_str()) != 0) {
    status = absl::InternalError(absl::StrCat("cannot rename ", temp, " to ", path));
  }
  if (!status.ok()) std::remove(temp.c_str());
  return status;
}

}  // namespace io
}  // namespace psc
