#include "common/summary/tf_record.h"

#include "absl/strings/str_cat.h"
#include "common/io/crc32c.h"

namespace psc {
namespace summary {
namespace {

uint32_t LoadLe32(const char* p) {
  const auto* u = reinterpret_cast<const uint8_t*>(p);
  return static_cast<uint32_t>(u[0]) | static_cast<uint32_t>(u[1]) << 8 |
         static_cast<uint32_t>(u[2]) << 16 | static_cast<uint32_t>(u[3]) << 24;
}

uint64_t LoadLe64(const char* p) {
  return static_cast<uint64_t>(LoadLe32(p)) | static_cast<uint64_t>(LoadLe32(p + 4)) << 32;
}

void PutLe32(std::string* out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

void PutLe64(std::string* out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

}  // namespace

std::string EncodeRecord(absl::string_view data) {
  std::string out;
  out.reserve(16 + data.size());
  PutLe64(&out, data.size());
  PutLe32(&out, io::MaskedCrc32c(out.data(), 8));
  out.append(data.data(), data.size());
  PutLe32(&out, io::MaskedCrc32c(data.data(), data.size()));
  return out;
}

absl::Status RecordReader::Next(absl::string_view* data, bool* end) {
  *end = false;
  record_offset_ = offset_;
  const uint64_t left = bytes_.size() - offset_;
  if (left == 0) {
    *end = true;
    return absl::OkStatus();
  }
  constexpr uint64_t kHeader = 12, kFooter = 4;
  if (left < kHeader) return Corrupt("truncated record header");
  const char* header = bytes_.data() + offset_;
  if (LoadLe32(header + 8) != io::MaskedCrc32c(header, 8)) return Corrupt("bad length CRC");
  const uint64_t length = LoadLe64(header);
  if (length > left - kHeader || left - kHeader - length < kFooter) {
    return Corrupt(
        absl::StrCat("truncated record (length ", length, ", ", left, " bytes left in the file)"));
  }
  *data = bytes_.substr(offset_ + kHeader, length);
  if (LoadLe32(header + kHeader + length) != io::MaskedCrc32c(data->data(), data->size())) {
    return Corrupt("bad data CRC");
  }
  offset_ += kHeader + length + kFooter;
  return absl::OkStatus();
}

absl::Status RecordReader::Corrupt(absl::string_view what) const {
  return absl::DataLossError(
      absl::StrCat(name_, ": ", what, " in record at offset ", record_offset_));
}

}  // namespace summary
}  // namespace psc
