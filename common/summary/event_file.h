// TensorBoard event files without TensorFlow: TFRecords (tf_record.h) of
// Event protos (proto/tensorboard.proto, compiled by protoc), as
// TensorFlow's events_writer writes them. EventWriter writes a file
// TensorBoard reads; ReadEventFile reads one back, verifying every record.
// Both go through the file-system seam (common/io/file_system.h).
#ifndef PSC_COMMON_SUMMARY_EVENT_FILE_H_
#define PSC_COMMON_SUMMARY_EVENT_FILE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/io/file_system.h"

namespace psc {
namespace summary {

// The first event of every file written here carries this file_version.
inline constexpr absl::string_view kEventFileVersion = "brain.Event:2";

// A serialized Event { wall_time, file_version = kEventFileVersion }.
std::string EncodeFileVersionEvent(double wall_time);
// A serialized Event { wall_time, step, summary { value { tag, simple_value } } }.
// As protoc's serializer writes proto3: fields at their default (wall_time 0,
// step 0) are left out; simple_value, in a oneof, is always written.
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
  // file in it, writes the file_version event and flushes it. `fs` (not
  // owned) is the file system (LocalFileSystem() when null).
  // Errors name the path: INVALID_ARGUMENT for an empty logdir or one that
  // exists but is not a directory (or has a non-directory ancestor); INTERNAL
  // for any other failure to create the directory or the file or to write.
  static absl::StatusOr<std::unique_ptr<EventWriter>> Create(const std::string& logdir,
                                                             io::FileSystem* fs = nullptr);

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
  EventWriter(std::string path, std::unique_ptr<io::WritableFile> file)
      : path_(std::move(path)), file_(std::move(file)) {}

  // Frames `event` as a record and appends it to the file's buffer.
  absl::Status WriteRecord(absl::string_view event);
  // Records `status` as the sticky error and returns it.
  absl::Status Fail(absl::Status status);

  const std::string path_;
  std::unique_ptr<io::WritableFile> file_;  // null once closed
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
// the file: NOT_FOUND if it does not exist; INVALID_ARGUMENT if it is not a
// regular file; INTERNAL for another failure to read it; DATA_LOSS naming
// the record's byte offset for a bad length CRC, a bad data CRC, a
// truncated record, or an Event that does not parse. Fields this build does
// not know are skipped.
absl::StatusOr<EventFile> ReadEventFile(const std::string& path, io::FileSystem* fs = nullptr);

// The same for an event file's bytes; `name` (the file) is for messages.
absl::StatusOr<EventFile> ParseEventFile(absl::string_view name, absl::string_view bytes);

}  // namespace summary
}  // namespace psc

#endif  // PSC_COMMON_SUMMARY_EVENT_FILE_H_
