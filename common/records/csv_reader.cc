#include "common/records/csv_reader.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"

namespace psc::records {
namespace {

constexpr size_t kChunk = 64 << 10;
// The most fields a row holds (an empty field still costs a string).
constexpr size_t kMaxFields = 1 << 20;

}  // namespace

absl::StatusOr<std::unique_ptr<CsvReader>> CsvReader::Open(
    io::FileSystem* fs, const std::string& path, std::optional<tfrecord::Compression> compression,
    uint64_t max_row_bytes) {
  PSC_ASSIGN_OR_RETURN(std::unique_ptr<io::RandomAccessFile> file, fs->OpenForRead(path));
  return Open(std::move(file), compression, max_row_bytes);
}

absl::StatusOr<std::unique_ptr<CsvReader>> CsvReader::Open(
    std::unique_ptr<io::RandomAccessFile> file, std::optional<tfrecord::Compression> compression,
    uint64_t max_row_bytes) {
  if (max_row_bytes == 0) {
    return absl::InvalidArgumentError("a CSV row limit of 0 bytes");
  }
  if (!compression.has_value()) {
    // gzip's magic bytes alone: two bytes of text can pass for a zlib
    // header, so zlib is read only when given.
    char prefix[3];
    const size_t n = static_cast<size_t>(std::min<uint64_t>(sizeof(prefix), file->size()));
    if (n > 0) PSC_RETURN_IF_ERROR(file->Read(0, n, prefix));
    compression = n == 3 && prefix[0] == '\x1f' && prefix[1] == '\x8b' && prefix[2] == 8
                      ? tfrecord::Compression::kGzip
                      : tfrecord::Compression::kNone;
  }
  PSC_ASSIGN_OR_RETURN(std::unique_ptr<tfrecord::ByteReader> bytes,
                       tfrecord::ByteReader::Open(std::move(file), *compression));
  return std::unique_ptr<CsvReader>(new CsvReader(std::move(bytes), max_row_bytes));
}

absl::StatusOr<bool> CsvReader::Get(char* c) {
  if (pos_ == buffer_.size()) {
    buffer_.resize(kChunk);
    PSC_ASSIGN_OR_RETURN(const size_t n, bytes_->Read(buffer_.data(), buffer_.size()));
    buffer_.resize(n);
    pos_ = 0;
    if (n == 0) return false;
  }
  *c = buffer_[pos_++];
  if (*c == '\n') ++line_;
  return true;
}

absl::Status CsvReader::Fail(absl::Status s) {
  failed_ = s;
  return s;
}

absl::Status CsvReader::Next(std::vector<std::string>* fields, bool* end) {
  *end = false;
  if (!failed_.ok()) return failed_;
  fields->clear();
  const auto bad = [&](absl::string_view what) {
    return Fail(absl::InvalidArgumentError(
        absl::StrCat(path(), ": line ", row_line_, ": ", what, " (RFC 4180 CSV)")));
  };
  // Skips empty lines; *end at the end of the stream.
  char c = 0;
  while (true) {
    row_line_ = line_;
    absl::StatusOr<bool> got = Get(&c);
    if (!got.ok()) return Fail(got.status());
    if (!*got) {
      *end = true;
      return absl::OkStatus();
    }
    if (c == '\n') continue;
    if (c == '\r') {
      got = Get(&c);
      if (!got.ok()) return Fail(got.status());
      if (!*got) {
        *end = true;
        return absl::OkStatus();
      }
      if (c == '\n') continue;
      return bad("a carriage return outside quotes without a line feed");
    }
    break;
  }
  uint64_t row_bytes = 0;
  std::string field;
  bool quoted = false;       // the field started with a quote
  bool in_quotes = false;    // inside them
  bool after_quote = false;  // the closing quote was read
  while (true) {
    if (++row_bytes > max_row_bytes_) {
      return Fail(absl::ResourceExhaustedError(absl::StrCat(
          path(), ": line ", row_line_, ": a row over ", max_row_bytes_, " bytes (the limit)")));
    }
    if (in_quotes) {
      if (c == '"') {
        in_quotes = false;
        after_quote = true;
      } else {
        field.push_back(c);
      }
    } else if (c == '"') {
      if (after_quote) {  // "" inside a quoted field: one quote
        field.push_back('"');
        in_quotes = true;
        after_quote = false;
      } else if (field.empty() && !quoted) {
        quoted = in_quotes = true;
      } else {
        return bad("a quote inside an unquoted field");
      }
    } else if (c == ',') {
      if (fields->size() >= kMaxFields) {
        return Fail(absl::ResourceExhaustedError(
            absl::StrCat(path(), ": line ", row_line_, ": a row of over ", kMaxFields, " fields")));
      }
      fields->push_back(std::move(field));
      field.clear();
      quoted = after_quote = false;
    } else if (c == '\n' || c == '\r') {
      if (c == '\r') {
        absl::StatusOr<bool> got = Get(&c);
        if (!got.ok()) return Fail(got.status());
        if (!*got || c != '\n') return bad("a carriage return outside quotes without a line feed");
      }
      fields->push_back(std::move(field));
      return absl::OkStatus();
    } else if (after_quote) {
      return bad("text after a closing quote");
    } else {
      field.push_back(c);
    }
    absl::StatusOr<bool> got = Get(&c);
    if (!got.ok()) return Fail(got.status());
    if (!*got) {
      if (in_quotes) return bad("the file ends inside a quoted field");
      fields->push_back(std::move(field));
      return absl::OkStatus();
    }
  }
}

}  // namespace psc::records
