#include "common/io/testing/zip_bomb.h"

#include <zlib.h>

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"

namespace psc {
namespace io {
namespace testing {
namespace {

constexpr uint64_t kBlock = uint64_t{16} << 20;

// Raw deflate of `in` (then a flush of kind `flush`) appended to `out`.
absl::Status Deflate(z_stream* z, const std::string& in, int flush, std::string* out) {
  z->next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z->avail_in = static_cast<uInt>(in.size());
  char buf[1 << 16];
  do {
    z->next_out = reinterpret_cast<Bytef*>(buf);
    z->avail_out = sizeof(buf);
    const int rc = deflate(z, flush);
    if (rc != Z_OK && rc != Z_STREAM_END && rc != Z_BUF_ERROR) {
      return absl::InternalError(absl::StrCat("deflate: ", rc));
    }
    out->append(buf, sizeof(buf) - z->avail_out);
  } while (z->avail_out == 0);
  return absl::OkStatus();
}

}  // namespace

absl::Status AddInflatingMember(zipFile zf, const std::string& name, const std::string& head,
                                char fill, uint64_t fill_count, std::optional<uint64_t> announced) {
  z_stream z{};
  if (deflateInit2(&z, 9, Z_DEFLATED, -MAX_WBITS, 9, Z_DEFAULT_STRATEGY) != Z_OK) {
    return absl::InternalError("deflateInit2");
  }
  const uint64_t blocks = fill_count / kBlock, rest = fill_count % kBlock;
  std::string first, block, last;
  absl::Status s = Deflate(&z, head, Z_FULL_FLUSH, &first);
  const std::string fill_block(static_cast<size_t>(std::min(fill_count, kBlock)), fill);
  if (s.ok() && blocks > 0) s = Deflate(&z, fill_block, Z_FULL_FLUSH, &block);
  if (s.ok()) s = Deflate(&z, fill_block.substr(0, rest), Z_FINISH, &last);
  deflateEnd(&z);
  if (!s.ok()) return s;
  uLong crc = crc32(0, reinterpret_cast<const Bytef*>(head.data()), head.size());
  const uLong block_crc = crc32(0, reinterpret_cast<const Bytef*>(fill_block.data()),
                                static_cast<uInt>(fill_block.size()));
  for (uint64_t i = 0; i < blocks; ++i) crc = crc32_combine64(crc, block_crc, kBlock);
  crc = crc32_combine64(
      crc, crc32(0, reinterpret_cast<const Bytef*>(fill_block.data()), static_cast<uInt>(rest)),
      rest);
  zip_fileinfo zi = {};
  if (zipOpenNewFileInZip3_64(zf, name.c_str(), &zi, nullptr, 0, nullptr, 0, nullptr, Z_DEFLATED, 9,
                              /*raw=*/1, -MAX_WBITS, 9, Z_DEFAULT_STRATEGY, nullptr, 0,
                              /*zip64=*/1) != ZIP_OK) {
    return absl::InternalError(absl::StrCat("cannot add ", name));
  }
  bool ok = zipWriteInFileInZip(zf, first.data(), static_cast<unsigned>(first.size())) == ZIP_OK;
  for (uint64_t i = 0; ok && i < blocks; ++i) {
    ok = zipWriteInFileInZip(zf, block.data(), static_cast<unsigned>(block.size())) == ZIP_OK;
  }
  ok = ok && zipWriteInFileInZip(zf, last.data(), static_cast<unsigned>(last.size())) == ZIP_OK;
  const uint64_t size = head.size() + fill_count;
  ok = zipCloseFileInZipRaw64(zf, announced.value_or(size), crc) == ZIP_OK && ok;
  return ok ? absl::OkStatus() : absl::InternalError(absl::StrCat("cannot write ", name));
}

absl::Status AddMember(zipFile zf, const std::string& name, const std::string& bytes) {
  zip_fileinfo zi = {};
  if (zipOpenNewFileInZip64(zf, name.c_str(), &zi, nullptr, 0, nullptr, 0, nullptr, Z_DEFLATED,
                            Z_DEFAULT_COMPRESSION, /*zip64=*/1) != ZIP_OK ||
      zipWriteInFileInZip(zf, bytes.data(), static_cast<unsigned>(bytes.size())) != ZIP_OK ||
      zipCloseFileInZip(zf) != ZIP_OK) {
    return absl::InternalError(absl::StrCat("cannot write ", name));
  }
  return absl::OkStatus();
}

}  // namespace testing
}  // namespace io
}  // namespace psc
