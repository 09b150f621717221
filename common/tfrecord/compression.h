// The compression of a TFRecord file, as tf.data's TFRecordDataset takes it
// (compression_type "", "GZIP", "ZLIB"), and what a file's first bytes say
// it is. Pure functions; thread-safe.
#ifndef PSC_COMMON_TFRECORD_COMPRESSION_H_
#define PSC_COMMON_TFRECORD_COMPRESSION_H_

#include <optional>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace psc {
namespace tfrecord {

enum class Compression { kNone, kGzip, kZlib };

// "none", "gzip", "zlib".
const char* CompressionName(Compression c);

// "none" (or TensorFlow's ""), "gzip", "zlib" (any case), or "auto" (no
// value: DetectCompression per file). INVALID_ARGUMENT naming the choices
// for anything else.
absl::StatusOr<std::optional<Compression>> ParseCompression(absl::string_view text);

// What a file that starts with `prefix` (its first 12 bytes, or all of a
// shorter file) is: uncompressed when it is empty or starts with a record
// header whose CRC holds; gzip when it starts with gzip's magic (1f 8b 08);
// zlib when it starts with a zlib header (deflate, a window of at most
// 32 KiB, the check bits); uncompressed otherwise, whose reader then reports
// the bad header at offset 0.
Compression DetectCompression(absl::string_view prefix);

}  // namespace tfrecord
}  // namespace psc

#endif  // PSC_COMMON_TFRECORD_COMPRESSION_H_
