#include "common/io/zip_member.h"

#include <sys/stat.h>
#include <unistd.h>
#include <zip.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <set>

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"

namespace psc {
namespace io {
namespace {

constexpr size_t kReadChunk = size_t{1} << 20;

}  // namespace

absl::StatusOr<std::unique_ptr<ZipMemberReader>> ZipMemberReader::Open(unzFile z,
                                                                       const unz_file_info64& info,
                                                                       std::string what) {
  if (info.flag & 1) {
    return absl::DataLossError(absl::StrCat(what, ": encrypted members are not supported"));
  }
  if (info.compression_method != 0 && info.compression_method != Z_DEFLATED) {
    return absl::DataLossError(absl::StrCat(what, ": compression method ", info.compression_method,
                                            " (only stored and deflate are supported)"));
  }
  if (int rc = unzOpenCurrentFile(z); rc != UNZ_OK) {
    return absl::DataLossError(absl::StrCat(what, ": cannot open the member (", rc, ")"));
  }
  std::unique_ptr<ZipMemberReader> r(new ZipMemberReader(z, info, std::move(what)));
  r->open_ = true;
  return r;
}

ZipMemberReader::~ZipMemberReader() {
  if (open_) unzCloseCurrentFile(z_);
}

absl::Status ZipMemberReader::Read(uint64_t n, std::string* out) {
  // Chunk by chunk, so the buffer grows with what arrives.
  while (n > 0) {
    const size_t old = out->size();
    // minizip stops at the size the zip entry announces: no room past it.
    const uint64_t announced_left =
        info_.uncompressed_size >= inflated_ ? info_.uncompressed_size - inflated_ : 0;
    const size_t take =
        static_cast<size_t>(std::min<uint64_t>({n, kReadChunk, announced_left + 1}));
    out->resize(old + take);
    const int got = unzReadCurrentFile(z_, out->data() + old, static_cast<unsigned>(take));
    if (got < 0) {
      out->resize(old);
      return absl::DataLossError(absl::StrCat(what_, ": cannot inflate (", got, ")"));
    }
    out->resize(old + static_cast<size_t>(got));
    inflated_ += static_cast<uint64_t>(got);
    if (got == 0) break;  // the end of the member
    n -= static_cast<uint64_t>(got);
  }
  return absl::OkStatus();
}

absl::Status ZipMemberReader::ReadRest(uint64_t declared, const std::string& why,
                                       std::string* out) {
  for (;;) {
    const uint64_t before = inflated_;
    // One byte past `declared` at most: enough to know it is passed.
    const uint64_t room = declared >= inflated_ ? declared - inflated_ : 0;
    PSC_RETURN_IF_ERROR(Read(std::min<uint64_t>(kReadChunk, room + 1), out));
    if (inflated_ > declared) {
      return absl::DataLossError(
          absl::StrCat(what_, ": inflated past the declared ", declared, " bytes (", why, ")"));
    }
    if (inflated_ == before) break;  // the end of the member
  }
  if (inflated_ != info_.uncompressed_size) {
    return absl::DataLossError(absl::StrCat(what_, ": ", inflated_, " bytes, its zip entry says ",
                                            info_.uncompressed_size));
  }
  open_ = false;
  if (unzCloseCurrentFile(z_) == UNZ_CRCERROR) {
    return absl::DataLossError(absl::StrCat(what_, ": CRC mismatch"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadZipMember(unzFile z, const unz_file_info64& info, uint64_t limit,
                                          const std::string& why, const std::string& what) {
  uint64_t bound = limit;
  std::string bound_why = why;
  if (info.compression_method == 0 && info.compressed_size < bound) {
    bound = info.compressed_size;
    bound_why = "a stored member's compressed size";
  } else if (info.compression_method != 0 &&
             info.compressed_size < ~uint64_t{0} / kMaxDeflateRatio &&
             info.compressed_size * kMaxDeflateRatio < bound) {
    bound = info.compressed_size * kMaxDeflateRatio;
    bound_why = absl::StrCat("what ", info.compressed_size, " deflated bytes expand to at most");
  }
  if (info.uncompressed_size > bound) {
    return absl::DataLossError(absl::StrCat(what, ": would be inflated past the declared ", bound,
                                            " bytes (", bound_why, "; its zip entry announces ",
                                            info.uncompressed_size, "); not inflated"));
  }
  PSC_ASSIGN_OR_RETURN(std::unique_ptr<ZipMemberReader> reader,
                       ZipMemberReader::Open(z, info, what));
  std::string bytes;
  PSC_RETURN_IF_ERROR(reader->ReadRest(bound, bound_why, &bytes));
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
                             ReadZipMember(z, info, max_bytes, "the caller's bound",
                                           absl::StrCat(path, ": ", name)));
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
    std::unique_ptr<std::FILE, int (*)(std::FILE*)> in(nullptr, &std::fclose);
    uint64_t size = 0;
    if (m.bytes != nullptr) {
      size = m.bytes->size();
    } else {
      std::error_code ec;
      size = std::filesystem::file_size(m.file, ec);
      in.reset(ec ? nullptr : std::fopen(m.file.c_str(), "rb"));
      if (in == nullptr) {
        status = absl::NotFoundError(
            absl::StrCat(path, ": cannot open ", m.file, " to add as ", m.name));
        break;
      }
    }
    zip_fileinfo zi = {};
    const int method = m.deflate ? Z_DEFLATED : 0;
    const int level = m.deflate ? Z_DEFAULT_COMPRESSION : 0;
    if (zipOpenNewFileInZip64(zf, m.name.c_str(), &zi, nullptr, 0, nullptr, 0, nullptr, method,
                              level, /*zip64=*/size >= 0xffffffffu) != ZIP_OK) {
      status = absl::InternalError(absl::StrCat(path, ": cannot add ", m.name));
      break;
    }
    std::string piece;
    for (uint64_t off = 0; off < size && status.ok(); off += kReadChunk) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(kReadChunk, size - off));
      const char* data = nullptr;
      if (m.bytes != nullptr) {
        data = m.bytes->data() + off;
      } else {
        piece.resize(n);
        if (std::fread(piece.data(), 1, n, in.get()) != n) {
          status = absl::InternalError(
              absl::StrCat(path, ": ", m.file, " ended before its ", size, " bytes"));
          break;
        }
        data = piece.data();
      }
      if (zipWriteInFileInZip(zf, data, static_cast<unsigned>(n)) != ZIP_OK) {
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
