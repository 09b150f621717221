#include "common/tfrecord/byte_reader.h"

#include <isa-l/igzip_lib.h>

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
// inflated a chunk of input at a time by ISA-L's igzip (Debian's
// libisal), which checks each member's CRC-32 or Adler-32 and its length
// as zlib does, 2-4x as fast on this project's records.
class InflateReader final : public ByteReader {
 public:
  InflateReader(std::unique_ptr<io::RandomAccessFile> file, Compression compression)
      : ByteReader(std::move(file), compression),
        in_(kChunk),
        state_(std::make_unique<inflate_state>()) {
    Start();
  }

  // Small reads (a record's header, a small record) come from a chunk
  // inflated ahead, so the inflater runs a 64 KiB output at a time, not
  // once per header. An error met inflating ahead is kept until the bytes
  // before it are read, so it surfaces where it did without the chunk.
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
  // A member's (or the zlib stream's) start: its header is parsed and its
  // trailer checked.
  void Start() {
    isal_inflate_init(state_.get());
    state_->crc_flag = compression_ == Compression::kGzip ? ISAL_GZIP : ISAL_ZLIB;
  }

  // Inflates up to n bytes into out: fewer at the end of the stream or on
  // an error (*error; the bytes before it are returned).
  size_t Inflate(char* out, size_t n, absl::Status* error) {
    inflate_state& z = *state_;
    size_t produced = 0;
    while (produced < n && !ended_) {
      if (z.avail_in == 0 && file_offset_ < file_->size()) {
        const size_t take =
            static_cast<size_t>(std::min<uint64_t>(kChunk, file_->size() - file_offset_));
        if (absl::Status s = file_->Read(file_offset_, take, in_.data()); !s.ok()) {
          *error = s;
          return produced;
        }
        file_offset_ += take;
        z.next_in = reinterpret_cast<uint8_t*>(in_.data());
        z.avail_in = static_cast<uint32_t>(take);
      }
      const size_t want = std::min<size_t>(n - produced, std::numeric_limits<uint32_t>::max());
      z.next_out = reinterpret_cast<uint8_t*>(out + produced);
      z.avail_out = static_cast<uint32_t>(want);
      const uint32_t avail_in = z.avail_in;
      const int r = isal_inflate(&z);
      produced += want - z.avail_out;
      inflated_ += want - z.avail_out;
      if (r != ISAL_DECOMP_OK) {
        *error = Damaged(IsalError(r));
        return produced;
      }
      if (z.avail_in == avail_in && z.avail_out == want && z.block_state != ISAL_BLOCK_FINISH &&
          avail_in > 0) {
        *error = Damaged("the inflater made no progress");
        return produced;
      }
      if (z.block_state == ISAL_BLOCK_FINISH) {
        const bool more = z.avail_in > 0 || file_offset_ < file_->size();
        if (!more) {
          ended_ = true;
        } else if (compression_ == Compression::kGzip) {
          // The next member, from the bytes already read.
          uint8_t* next_in = z.next_in;
          const uint32_t avail_in = z.avail_in;
          Start();
          z.next_in = next_in;
          z.avail_in = avail_in;
        } else {
          *error = Damaged("bytes after the end of the zlib stream");
          return produced;
        }
        continue;
      }
      // Room left and no input to come: the stream stops short.
      if (z.avail_out > 0 && z.avail_in == 0 && file_offset_ >= file_->size()) {
        *error = Damaged("the compressed stream is truncated");
        return produced;
      }
    }
    return produced;
  }

  static const char* IsalError(int r) {
    switch (r) {
      case ISAL_INVALID_BLOCK:
        return "invalid deflate block";
      case ISAL_INVALID_SYMBOL:
        return "invalid deflate symbol";
      case ISAL_INVALID_LOOKBACK:
        return "invalid distance too far back";
      case ISAL_INVALID_WRAPPER:
        return "invalid header";
      case ISAL_UNSUPPORTED_METHOD:
        return "unknown compression method";
      case ISAL_INCORRECT_CHECKSUM:
        return "incorrect data check";
      case ISAL_NEED_DICT:
        return "the stream needs a preset dictionary";
      default:
        return "inflate error";
    }
  }

  absl::Status Damaged(absl::string_view what) const {
    return absl::DataLossError(absl::StrCat(path(), ": ", CompressionName(compression_), ": ", what,
                                            " (at offset ", inflated_, " of the inflated stream)"));
  }

  std::vector<char> in_;
  std::unique_ptr<inflate_state> state_;  // about 87 KiB: its window and output buffer
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
  return std::make_unique<InflateReader>(std::move(file), compression);
}

}  // namespace tfrecord
}  // namespace psc
