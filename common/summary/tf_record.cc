#include "common/summary/tf_record.h"

#include "absl/strings/str_cat.h"

namespace psc {
namespace summary {

absl::Status RecordReader::Next(absl::string_view* data, bool* end) {
  *end = false;
  record_offset_ = offset_;
  const uint64_t left = bytes_.size() - offset_;
  if (left == 0) {
    *end = true;
    return absl::OkStatus();
  }
  constexpr uint64_t kHeader = tfrecord::kHeaderBytes, kFooter = tfrecord::kFooterBytes;
  if (left < kHeader) return Corrupt("truncated record header");
  const char* header = bytes_.data() + offset_;
  uint64_t length = 0;
  if (!tfrecord::DecodeHeader(header, &length)) return Corrupt("bad length CRC");
  if (length > left - kHeader || left - kHeader - length < kFooter) {
    return Corrupt(
        absl::StrCat("truncated record (length ", length, ", ", left, " bytes left in the file)"));
  }
  *data = bytes_.substr(offset_ + kHeader, length);
  if (!tfrecord::FooterMatches(header + kHeader + length, *data)) {
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
