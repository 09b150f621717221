// TFRecord framing, as TensorFlow's record_writer writes it (tf.data's
// TFRecordDataset, TensorBoard's event files): each record is
//
//   uint64 LE length | uint32 LE MaskedCrc32c(length bytes) |
//   data[length]     | uint32 LE MaskedCrc32c(data)
//
// (common/io/crc32c.h). Pure functions; thread-safe.
#ifndef PSC_COMMON_TFRECORD_FRAMING_H_
#define PSC_COMMON_TFRECORD_FRAMING_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"

namespace psc {
namespace tfrecord {

constexpr size_t kHeaderBytes = 12;  // the length and its CRC
constexpr size_t kFooterBytes = 4;   // the data's CRC

// `data` framed as one record (16 + data.size() bytes).
std::string EncodeRecord(absl::string_view data);
// Appends the same to *out.
void AppendRecord(absl::string_view data, std::string* out);

// The length a record's header declares, false when the header's CRC does
// not match its length bytes. `header` holds kHeaderBytes.
bool DecodeHeader(const char* header, uint64_t* length);
// Whether `footer` (kFooterBytes) is the CRC of `data`.
bool FooterMatches(const char* footer, absl::string_view data);

}  // namespace tfrecord
}  // namespace psc

#endif  // PSC_COMMON_TFRECORD_FRAMING_H_
