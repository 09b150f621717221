#include "common/tfrecord/byte_reader.h"

#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"

namespace psc {
namespace tfrecord {
namespace {

constexpr size_t kChunk = size_t{64} << 10;

// An uncompressed file: reads at its offset, straight into the caller's buffer.
class PlainReader final : public ByteReader {
 public:
  explicit PlainReader(std::unique_ptr<io::RandomAccessFile> file)
      : ByteReader(std::move(file), Compression::kNone) {}

  // Small reads (a record's header, a small record) come from a chunk read
  // ahead: one system call per 64 KiB, not two per record. A read of a
  // chunk or more goes to the file directly.
  absl::StatusOr<size_t> Read(char* out, size_t n) override {
    const uint64_t left = file_->size() - position_;
    const size_t take = static_cast<size_t>(std::min<uint64_t>(n, left));
    size_t done = 0;
    while (done < take) {
      if (next_ == chunk_.size()) {  // the chunk is used up
        const size_t want = take - done;
        const uint64_t at = position_ + done;
        if (want >= kChunk) {
          PSC_RETURN_IF_ERROR(file_->Read(at, want, out + done));
          done += want;
          break;
        }
        chunk_.resize(static_cast<size_t>(std::min<uint64_t>(kChunk, file_->size() - at)));
        PSC_RETURN_IF_ERROR(file_->Read(at, chunk_.size(), chunk_.data()));
        next_ = 0;
      }
      const size_t copy = std::min(take - done, chunk_.size() - next_);
      std::memcpy(out + done, chunk_.data() + next_, copy);
      next_ += copy;
      done += copy;
    }
    position_ += take;
    return take;
  }

 private:
  std::string chunk_;  // the file's bytes [position_ - next_, position_ - next_ + size)
  size_t next_ = 0;
};

// A gzip (RFC 1952; members one after another) or zlib (RFC 1950) stream,
// inflated a chunk of input at a time.
class InflateReader final : public ByteReader {
 public:
  InflateReader(std::unique_ptr<io::RandomAccessFile> file, Compression compression)
      : ByteReader(std::move(file), compression), in_(kChunk) {}
  ~InflateReader() override {
    if (initialized_) inflateEnd(&z_);
  }

  absl::Status Init() {
    z_ = {};
    // 15: the largest window; +16: a gzip header and trailer.
    const int bits = compression_ == Compression::kGzip ? 15 + 16 : 15;
    if (inflateInit2(&z_, bits) != Z_OK) {
      return absl::ResourceExhaustedError(absl::StrCat(path(), ": zlib cannot start inflating"));
    }
    initialized_ = true;
    return absl::OkStatus();
  }

  // Small reads (a record's header, a small record) come from a chunk
  // inflated ahead, so zlib runs a 64 KiB output at a time, not once per
  // header. An error met inflating ahead is kept until the bytes before it
  // are read, so it surfaces where it did without the chunk.
  absl::StatusOr<size_t> Read(char* out, size_t n) override {
    size_t given = 0;
    while (given < n) {
      if (next_ < have_) {
        const size_t copy = std::min(n - given, have_ - next_);
        std::memcpy(out + given, out_.data() + next_, copy);
        next_ += copy;
        given += copy;
        continue;
      }
      if (!pending_.ok()) return pending_;
      if (ended_) break;
      if (n - given >= kChunk) {  // large: straight into the caller's buffer
        absl::Status error;
        given += Inflate(out + given, n - given, &error);
        if (!error.ok()) return pending_ = error;
        continue;
      }
      out_.resize(kChunk);
      have_ = Inflate(out_.data(), kChunk, &pending_);
      next_ = 0;
    }
    position_ += given;
    return given;
  }

 private:
  // Inflates up to n bytes into out: fewer at the end of the stream or on
  // an error (*error; the bytes before it are returned).
  size_t Inflate(char* out, size_t n, absl::Status* error) {
    size_t produced = 0;
    while (produced < n && !ended_) {
      if (z_.avail_in == 0 && file_offset_ < file_->size()) {
        const size_t take =
            static_cast<size_t>(std::min<uint64_t>(kChunk, file_->size() - file_offset_));
        if (absl::Status s = file_->Read(file_offset_, take, in_.data()); !s.ok()) {
          *error = s;
          return produced;
        }
        file_offset_ += take;
        z_.next_in = reinterpret_cast<Bytef*>(in_.data());
        z_.avail_in = static_cast<uInt>(take);
      }
      const size_t want = std::min<size_t>(n - produced, std::numeric_limits<uInt>::max());
      z_.next_out = reinterpret_cast<Bytef*>(out + produced);
      z_.avail_out = static_cast<uInt>(want);
      const int r = inflate(&z_, Z_NO_FLUSH);
      produced += want - z_.avail_out;
      inflated_ += want - z_.avail_out;
      if (r == Z_STREAM_END) {
        const bool more = z_.avail_in > 0 || file_offset_ < file_->size();
        if (!more) {
          ended_ = true;
        } else if (compression_ == Compression::kGzip) {
          inflateReset(&z_);  // the next member
        } else {
          *error = Damaged("bytes after the end of the zlib stream");
          return produced;
        }
        continue;
      }
      if (r == Z_BUF_ERROR && z_.avail_in == 0 && file_offset_ >= file_->size()) {
        *error = Damaged("the compressed stream is truncated");
        return produced;
      }
      if (r != Z_OK && r != Z_BUF_ERROR) {
        *error = Damaged(z_.msg != nullptr ? z_.msg : absl::StrCat("zlib error ", r));
        return produced;
      }
    }
    return produced;
  }

  absl::Status Damaged(absl::string_view what) const {
    return absl::DataLossError(absl::StrCat(path(), ": ", CompressionName(compression_), ": ", what,
                                            " (at offset ", inflated_, " of the inflated stream)"));
  }

  std::vector<char> in_;
  z_stream z_ = {};
  bool initialized_ = false;
  bool ended_ = false;
  uint64_t file_offset_ = 0;
  uint64_t inflated_ = 0;  // the bytes inflated so far (read ahead included)
  std::string out_;        // inflated ahead: [next_, have_) not yet given
  size_t next_ = 0, have_ = 0;
  absl::Status pending_;  // met inflating ahead, returned once those bytes are read
};

}  // namespace

absl::StatusOr<std::unique_ptr<ByteReader>> ByteReader::Open(
    std::unique_ptr<io::RandomAccessFile> file, Compression compression) {
  if (compression == Compression::kNone) return std::make_unique<PlainReader>(std::move(file));
  auto reader = std::make_unique<InflateReader>(std::move(file), compression);
  PSC_RETURN_IF_ERROR(reader->Init());
  return std::unique_ptr<ByteReader>(std::move(reader));
}

}  // namespace tfrecord
}  // namespace psc
