#include "common/tfrecord/compression.h"

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/tfrecord/framing.h"

namespace psc {
namespace tfrecord {

const char* CompressionName(Compression c) {
  switch (c) {
    case Compression::kNone:
      return "none";
    case Compression::kGzip:
      return "gzip";
    case Compression::kZlib:
      return "zlib";
  }
  return "?";
}

absl::StatusOr<std::optional<Compression>> ParseCompression(absl::string_view text) {
  const std::string t = absl::AsciiStrToLower(text);
  if (t == "auto") return std::optional<Compression>();
  if (t.empty() || t == "none") return std::optional<Compression>(Compression::kNone);
  if (t == "gzip") return std::optional<Compression>(Compression::kGzip);
  if (t == "zlib") return std::optional<Compression>(Compression::kZlib);
  return absl::InvalidArgumentError(
      absl::StrCat("compression \"", text, "\": want auto, none, gzip or zlib"));
}

Compression DetectCompression(absl::string_view prefix) {
  uint64_t length = 0;
  if (prefix.empty() || (prefix.size() >= kHeaderBytes && DecodeHeader(prefix.data(), &length))) {
    return Compression::kNone;
  }
  const auto byte = [&](size_t i) { return static_cast<uint8_t>(prefix[i]); };
  if (prefix.size() >= 3 && byte(0) == 0x1f && byte(1) == 0x8b && byte(2) == 8) {
    return Compression::kGzip;
  }
  // RFC 1950: CM 8 (deflate), CINFO <= 7, (CMF * 256 + FLG) % 31 == 0.
  if (prefix.size() >= 2 && (byte(0) & 0x0f) == 8 && (byte(0) >> 4) <= 7 &&
      (byte(0) * 256 + byte(1)) % 31 == 0) {
    return Compression::kZlib;
  }
  return Compression::kNone;
}

}  // namespace tfrecord
}  // namespace psc
