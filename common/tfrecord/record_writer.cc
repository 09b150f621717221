#include "common/tfrecord/record_writer.h"

#include <zlib.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"
#include "common/tfrecord/framing.h"
#include "common/tfrecord/record_reader.h"

namespace psc {
namespace tfrecord {

struct RecordWriter::Deflater {
  z_stream z = {};
  std::string out = std::string(64 << 10, '\0');
  ~Deflater() { deflateEnd(&z); }
};

absl::StatusOr<std::unique_ptr<RecordWriter>> RecordWriter::Create(io::FileSystem* fs,
                                                                   const std::string& path,
                                                                   Compression compression) {
  std::unique_ptr<Deflater> deflater;
  if (compression != Compression::kNone) {
    deflater = std::make_unique<Deflater>();
    // Window bits 31: a gzip header and trailer; 15: zlib's.
    if (deflateInit2(&deflater->z, Z_DEFAULT_COMPRESSION, Z_DEFLATED,
                     compression == Compression::kGzip ? 31 : 15, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
      return absl::InternalError(absl::StrCat(path, ": zlib's deflateInit2 failed"));
    }
  }
  PSC_ASSIGN_OR_RETURN(std::unique_ptr<io::WritableFile> file,
                       fs->OpenForWrite(path, io::OpenMode::kCreateNew));
  return std::unique_ptr<RecordWriter>(new RecordWriter(std::move(file), std::move(deflater)));
}

RecordWriter::RecordWriter(std::unique_ptr<io::WritableFile> file,
                           std::unique_ptr<Deflater> deflater)
    : file_(std::move(file)), deflater_(std::move(deflater)) {}

RecordWriter::~RecordWriter() {
  if (!closed_) Close().IgnoreError();
}

absl::Status RecordWriter::Put(absl::string_view bytes, bool finish) {
  if (deflater_ == nullptr) return file_->Append(bytes);
  z_stream& z = deflater_->z;
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
  z.avail_in = static_cast<uInt>(bytes.size());  // a framed record: < 2^31 + 16
  while (true) {
    z.next_out = reinterpret_cast<Bytef*>(deflater_->out.data());
    z.avail_out = static_cast<uInt>(deflater_->out.size());
    const int rc = deflate(&z, finish ? Z_FINISH : Z_NO_FLUSH);
    if (rc != Z_OK && rc != Z_STREAM_END && rc != Z_BUF_ERROR) {
      return absl::InternalError(absl::StrCat(file_->path(), ": zlib's deflate failed (", rc, ")"));
    }
    const size_t made = deflater_->out.size() - z.avail_out;
    if (made > 0)
      PSC_RETURN_IF_ERROR(file_->Append(absl::string_view(deflater_->out.data(), made)));
    if (finish ? rc == Z_STREAM_END : (z.avail_in == 0 && z.avail_out > 0)) return absl::OkStatus();
  }
}

absl::Status RecordWriter::Write(absl::string_view record) {
  if (!failed_.ok()) return failed_;
  if (closed_) return absl::FailedPreconditionError(absl::StrCat(file_->path(), ": closed"));
  if (record.size() > kMaxRecordBytesLimit) {
    return absl::InvalidArgumentError(absl::StrCat(file_->path(), ": a record of ", record.size(),
                                                   " bytes is over ", kMaxRecordBytesLimit));
  }
  framed_.clear();
  AppendRecord(record, &framed_);
  failed_ = Put(framed_, false);
  return failed_;
}

absl::Status RecordWriter::Close() {
  if (closed_) return failed_;
  closed_ = true;
  if (failed_.ok() && deflater_ != nullptr) failed_ = Put("", true);
  absl::Status closed = file_->Close();
  if (failed_.ok()) failed_ = closed;
  return failed_;
}

}  // namespace tfrecord
}  // namespace psc
