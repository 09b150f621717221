#include "common/tfrecord/framing.h"

#include "common/io/crc32c.h"

namespace psc {
namespace tfrecord {
namespace {

uint32_t LoadLe32(const char* p) {
  const auto* u = reinterpret_cast<const uint8_t*>(p);
  return static_cast<uint32_t>(u[0]) | static_cast<uint32_t>(u[1]) << 8 |
         static_cast<uint32_t>(u[2]) << 16 | static_cast<uint32_t>(u[3]) << 24;
}

void PutLe(std::string* out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

}  // namespace

void AppendRecord(absl::string_view data, std::string* out) {
  const size_t start = out->size();
  PutLe(out, data.size(), 8);
  PutLe(out, io::MaskedCrc32c(out->data() + start, 8), 4);
  out->append(data.data(), data.size());
  PutLe(out, io::MaskedCrc32c(data.data(), data.size()), 4);
}

std::string EncodeRecord(absl::string_view data) {
  std::string out;
  out.reserve(kHeaderBytes + data.size() + kFooterBytes);
  AppendRecord(data, &out);
  return out;
}

bool DecodeHeader(const char* header, uint64_t* length) {
  if (LoadLe32(header + 8) != io::MaskedCrc32c(header, 8)) return false;
  *length = static_cast<uint64_t>(LoadLe32(header)) | static_cast<uint64_t>(LoadLe32(header + 4))
                                                          << 32;
  return true;
}

bool FooterMatches(const char* footer, absl::string_view data) {
  return LoadLe32(footer) == io::MaskedCrc32c(data.data(), data.size());
}

}  // namespace tfrecord
}  // namespace psc
