// The TFRecords of an event file (common/tfrecord/framing.h), read from
// bytes in memory; thread-compatible.
#ifndef PSC_COMMON_SUMMARY_TF_RECORD_H_
#define PSC_COMMON_SUMMARY_TF_RECORD_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "common/tfrecord/framing.h"

namespace psc {
namespace summary {

using tfrecord::EncodeRecord;

// Reads the records of a file's bytes, verifying both CRCs of each.
class RecordReader {
 public:
  // `bytes` must outlive the reader; `name` (the file) is for messages.
  RecordReader(absl::string_view name, absl::string_view bytes) : name_(name), bytes_(bytes) {}

  // The next record into *data; *end instead at a clean end of the bytes.
  // DATA_LOSS naming the file and the record's offset for a bad length CRC,
  // a bad data CRC, or a truncated record.
  absl::Status Next(absl::string_view* data, bool* end);

  // DATA_LOSS naming the file and the offset of the record Next last read.
  absl::Status Corrupt(absl::string_view what) const;

 private:
  const absl::string_view name_;
  const absl::string_view bytes_;
  uint64_t offset_ = 0;         // where the next record starts
  uint64_t record_offset_ = 0;  // where the record Next last read starts
};

}  // namespace summary
}  // namespace psc

#endif  // PSC_COMMON_SUMMARY_TF_RECORD_H_
