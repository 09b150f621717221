// TFRecord files written a record at a time (framing.h), plain or deflated
// as TensorFlow's TFRecordWriter writes them with GZIP or ZLIB options: a
// stream through zlib, 64 KiB of output at a time, so a file of any size
// costs a bounded buffer. Thread-compatible.
#ifndef PSC_COMMON_TFRECORD_RECORD_WRITER_H_
#define PSC_COMMON_TFRECORD_RECORD_WRITER_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/io/file_system.h"
#include "common/tfrecord/compression.h"

namespace psc {
namespace tfrecord {

class RecordWriter {
 public:
  // Creates `path` on `fs` (ALREADY_EXISTS if it is there).
  static absl::StatusOr<std::unique_ptr<RecordWriter>> Create(io::FileSystem* fs,
                                                              const std::string& path,
                                                              Compression compression);
  ~RecordWriter();

  // One record, framed (and deflated). INVALID_ARGUMENT for a record over
  // kMaxRecordBytesLimit; the file's errors; after an error every call
  // returns it again.
  absl::Status Write(absl::string_view record);
  // Ends the compressed stream and closes the file.
  absl::Status Close();

 private:
  struct Deflater;
  RecordWriter(std::unique_ptr<io::WritableFile> file, std::unique_ptr<Deflater> deflater);
  absl::Status Put(absl::string_view bytes, bool finish);

  std::unique_ptr<io::WritableFile> file_;
  std::unique_ptr<Deflater> deflater_;  // null: plain
  std::string framed_;
  absl::Status failed_;
  bool closed_ = false;
};

}  // namespace tfrecord
}  // namespace psc

#endif  // PSC_COMMON_TFRECORD_RECORD_WRITER_H_
