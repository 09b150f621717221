// TensorBoard event files without TensorFlow: the TFRecord framing (length and
// data, each guarded by a masked CRC-32C) and hand-encoded Event / Summary
// protos for scalars, as TensorFlow's record_writer and events_writer write
// them. EventWriter writes a file TensorBoard reads; ReadEventFile reads one
// back, verifying every record.
//
// On-disk record:  uint64 LE length | uint32 LE MaskedCrc32c(length bytes) |
//                  data[length]     | uint32 LE MaskedCrc32c(data)
// Protos (proto3 wire format, only the fields used here):
//   Event   { double wall_time = 1; int64 step = 2; string file_version = 3;
//             Summary summary = 5; }
//   Summary { repeated Value value = 1; }
//   Value   { string tag = 1; float simple_value = 2; }
#ifndef PSC_COMMON_SUMMARY_TENSORBOARD_H_
#define PSC_COMMON_SUMMARY_TENSORBOARD_H_

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace psc {
namespace summary {

// The first event of every file written here carries this file_version.
inline constexpr absl::string_view kEventFileVersion = "brain.Event:2";

// CRC-32C (Castagnoli; reflected polynomial 0x82F63B78, init and final xor
// 0xFFFFFFFF). Crc32c("123456789") == 0xE3069283.
uint32_t Crc32c(const void* data, size_t n);
// The CRC-32C of A followed by the `n` bytes at `data`, given crc == Crc32c(A).
uint32_t Crc32cExtend(uint32_t crc, const void* data, size_t n);
// ((crc >> 15) | (crc << 17)) + 0xa282ead8 of Crc32c(data, n): the checksum
// TFRecords store, so that a CRC over data that embeds CRCs stays strong.
uint32_t MaskedCrc32c(const void* data, size_t n);

// Encoders, exposed for tests and tools. Pure functions.
//
// `data` framed as one TFRecord (16 + data.size() bytes).
std::string EncodeRecord(absl::string_view data);
// A serialized Event { wall_time, file_version = kEventFileVersion }.
std::string EncodeFileVersionEvent(double wall_time);
// A serialized Event { wall_time, step, summary { value { tag, simple_value } } }.
// Fields at their proto3 default (wall_time 0, step 0) are omitted, as a proto3
// serializer would; simple_value is in a oneof and is always written.
std::string EncodeScalarEvent(absl::string_view tag, int64_t step, float value, double wall_time);

// Writes one event file: <logdir>/events.out.tfevents.<unix seconds>.<hostname>.
// If that name is taken (another writer in the same second), ".1", ".2", ...
// is appended; TensorBoard reads any file whose name contains "tfevents".
//
// Records are buffered in the process; they reach the OS on Flush(), Close(),
// destruction, or when the buffer fills. Call Flush() at the end of each epoch
// (or every few seconds) so a live TensorBoard sees progress.
//
// Lifecycle: OPEN (after Create) -> CLOSED (after Close or destruction).
// After a failed write the file may end in a partial record, so the first
// write error is sticky: every later call returns it.
//
// Thread-compatible.
class EventWriter {
 public:
  // Creates `logdir` and its parents as needed (mkdir -p), creates a new event
  // file in it, writes the file_version event and flushes it.
  // Errors name the path: INVALID_ARGUMENT for an empty logdir or one that
  // exists but is not a directory (or has a non-directory ancestor); INTERNAL
  // for any other failure to create the directory or the file or to write.
  static absl::StatusOr<std::unique_ptr<EventWriter>> Create(const std::string& logdir);

  EventWriter(const EventWriter&) = delete;
  EventWriter& operator=(const EventWriter&) = delete;

  // Flushes and closes; errors are dropped (call Close() to see them).
  ~EventWriter();

  // Appends one scalar event, with wall_time = now (Unix seconds) unless given.
  // INVALID_ARGUMENT for an empty tag; FAILED_PRECONDITION after Close();
  // INTERNAL (naming the file) on a write error.
  absl::Status AddScalar(const std::string& tag, int64_t step, float value);
  absl::Status AddScalar(const std::string& tag, int64_t step, float value, double wall_time);

  // Pushes buffered records to the OS and fsyncs the file. FAILED_PRECONDITION
  // after Close(); INTERNAL (naming the file) on failure.
  absl::Status Flush();

  // Flushes, fsyncs and closes the file. Idempotent: a second call returns OK
  // (or the sticky write error).
  absl::Status Close();

  // The event file's full path.
  const std::string& path() const { return path_; }

 private:
  EventWriter(std::string path, std::FILE* file) : path_(std::move(path)), file_(file) {}

  // Frames `event` as a record and appends it to the stdio buffer.
  absl::Status WriteRecord(absl::string_view event);
  // Records `status` as the sticky error and returns it.
  absl::Status Fail(absl::Status status);

  const std::string path_;
  std::FILE* file_;  // Owned; null once closed.
  absl::Status error_;
};

// One Summary.Value with a simple_value, with the step and wall_time of the
// Event that carried it.
struct ScalarEvent {
  std::string tag;
  int64_t step = 0;
  float value = 0;
  double wall_time = 0;
};

struct EventFile {
  // The file_version of the first event that has one ("" if none does).
  std::string file_version;
  // Every Summary.Value that carries a simple_value, in file order. Values of
  // other kinds (tensors, images, histograms) and other events are skipped.
  std::vector<ScalarEvent> scalars;
};

// Reads a whole event file, verifying both CRCs of every record. Errors name
// the file: NOT_FOUND if it does not exist; INTERNAL for another failure to
// open or read it; DATA_LOSS naming the record's byte offset for a bad length
// CRC, a bad data CRC, a truncated record, or an Event that does not parse.
// Unknown fields of wire types 0, 1, 2 and 5 are skipped.
absl::StatusOr<EventFile> ReadEventFile(const std::string& path);

}  // namespace summary
}  // namespace psc

#endif  // PSC_COMMON_SUMMARY_TENSORBOARD_H_
