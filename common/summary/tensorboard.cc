#include "common/summary/tensorboard.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace psc {
namespace summary {
namespace {

// ---- CRC-32C, slicing-by-8 -------------------------------------------------

constexpr uint32_t kCrc32cPoly = 0x82F63B78;  // Reflected Castagnoli.
constexpr uint32_t kMaskDelta = 0xa282ead8;

struct Crc32cTables {
  // t[0] is the byte-at-a-time table; t[k][b] is the CRC of byte b followed by
  // k zero bytes, so eight bytes fold in with eight lookups.
  uint32_t t[8][256] = {};
};

constexpr Crc32cTables MakeCrc32cTables() {
  Crc32cTables tables;
  for (uint32_t b = 0; b < 256; ++b) {
    uint32_t crc = b;
    for (int i = 0; i < 8; ++i) crc = (crc >> 1) ^ ((crc & 1) ? kCrc32cPoly : 0);
    tables.t[0][b] = crc;
  }
  for (int k = 1; k < 8; ++k) {
    for (int b = 0; b < 256; ++b) {
      const uint32_t prev = tables.t[k - 1][b];
      tables.t[k][b] = (prev >> 8) ^ tables.t[0][prev & 0xff];
    }
  }
  return tables;
}

constexpr Crc32cTables kCrc32cTables = MakeCrc32cTables();

uint32_t LoadLe32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 |
         static_cast<uint32_t>(p[2]) << 16 | static_cast<uint32_t>(p[3]) << 24;
}

uint64_t LoadLe64(const uint8_t* p) {
  return static_cast<uint64_t>(LoadLe32(p)) | static_cast<uint64_t>(LoadLe32(p + 4)) << 32;
}

void PutLe32(std::string* out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

void PutLe64(std::string* out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

uint32_t Mask(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + kMaskDelta; }

// ---- Protobuf wire format ----------------------------------------------------

enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5 };

// Event, Summary and Value field numbers.
constexpr uint32_t kEventWallTimeField = 1;
constexpr uint32_t kEventStepField = 2;
constexpr uint32_t kEventFileVersionField = 3;
constexpr uint32_t kEventSummaryField = 5;
constexpr uint32_t kSummaryValueField = 1;
constexpr uint32_t kValueTagField = 1;
constexpr uint32_t kValueSimpleValueField = 2;

void PutVarint(std::string* out, uint64_t v) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

void PutKey(std::string* out, uint32_t field, WireType type) {
  PutVarint(out, (static_cast<uint64_t>(field) << 3) | type);
}

void PutBytesField(std::string* out, uint32_t field, absl::string_view bytes) {
  PutKey(out, field, kLengthDelimited);
  PutVarint(out, bytes.size());
  out->append(bytes.data(), bytes.size());
}

void PutDoubleField(std::string* out, uint32_t field, double v) {
  uint64_t bits;
  std::memcpy(&bits, &v, sizeof(bits));
  PutKey(out, field, kFixed64);
  PutLe64(out, bits);
}

// Writes wall_time unless it is +0.0, the proto3 default.
void PutWallTime(std::string* out, double wall_time) {
  uint64_t bits;
  std::memcpy(&bits, &wall_time, sizeof(bits));
  if (bits != 0) PutDoubleField(out, kEventWallTimeField, wall_time);
}

// Reads proto3 wire format from a buffer it does not own.
class ProtoReader {
 public:
  explicit ProtoReader(absl::string_view data) : data_(data) {}

  bool done() const { return pos_ == data_.size(); }

  // Reads a field key. Error for field number 0 or a bad varint.
  absl::Status ReadKey(uint32_t* field, uint32_t* type) {
    uint64_t key;
    if (!ReadVarint(&key)) return Malformed("bad field key");
    *field = static_cast<uint32_t>(key >> 3);
    *type = static_cast<uint32_t>(key & 7);
    if (*field == 0 || (key >> 3) > 0x1fffffff) return Malformed("bad field number");
    return absl::OkStatus();
  }

  bool ReadVarint(uint64_t* v) {
    uint64_t result = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (pos_ >= data_.size()) return false;
      const uint8_t byte = static_cast<uint8_t>(data_[pos_++]);
      result |= static_cast<uint64_t>(byte & 0x7f) << shift;
      if ((byte & 0x80) == 0) {
        *v = result;
        return true;
      }
    }
    return false;  // More than 10 bytes.
  }

  bool ReadFixed32(uint32_t* v) {
    if (data_.size() - pos_ < 4) return false;
    *v = LoadLe32(reinterpret_cast<const uint8_t*>(data_.data() + pos_));
    pos_ += 4;
    return true;
  }

  bool ReadFixed64(uint64_t* v) {
    if (data_.size() - pos_ < 8) return false;
    *v = LoadLe64(reinterpret_cast<const uint8_t*>(data_.data() + pos_));
    pos_ += 8;
    return true;
  }

  bool ReadBytes(absl::string_view* v) {
    uint64_t n;
    if (!ReadVarint(&n) || n > data_.size() - pos_) return false;
    *v = data_.substr(pos_, n);
    pos_ += n;
    return true;
  }

  // Skips the value of a field of wire type `type` (groups are not supported).
  absl::Status Skip(uint32_t type) {
    uint64_t u64;
    uint32_t u32;
    absl::string_view bytes;
    bool ok = false;
    switch (type) {
      case kVarint:
        ok = ReadVarint(&u64);
        break;
      case kFixed64:
        ok = ReadFixed64(&u64);
        break;
      case kLengthDelimited:
        ok = ReadBytes(&bytes);
        break;
      case kFixed32:
        ok = ReadFixed32(&u32);
        break;
      default:
        return Malformed(absl::StrCat("unsupported wire type ", type));
    }
    return ok ? absl::OkStatus() : Malformed("truncated field");
  }

  absl::Status Malformed(absl::string_view what) const {
    return absl::DataLossError(absl::StrCat(what, " at byte ", pos_, " of ", data_.size()));
  }

 private:
  absl::string_view data_;
  size_t pos_ = 0;
};

// Appends to `scalars` the Value in `data` if it has a simple_value.
absl::Status ParseValue(absl::string_view data, std::vector<ScalarEvent>* scalars) {
  ProtoReader r(data);
  ScalarEvent scalar;
  bool has_simple_value = false;
  while (!r.done()) {
    uint32_t field = 0, type = 0;
    if (absl::Status s = r.ReadKey(&field, &type); !s.ok()) return s;
    if (field == kValueTagField && type == kLengthDelimited) {
      absl::string_view tag;
      if (!r.ReadBytes(&tag)) return r.Malformed("truncated Value.tag");
      scalar.tag = std::string(tag);
    } else if (field == kValueSimpleValueField && type == kFixed32) {
      uint32_t bits;
      if (!r.ReadFixed32(&bits)) return r.Malformed("truncated Value.simple_value");
      std::memcpy(&scalar.value, &bits, sizeof(bits));
      has_simple_value = true;
    } else if (absl::Status s = r.Skip(type); !s.ok()) {
      return s;
    }
  }
  if (has_simple_value) scalars->push_back(std::move(scalar));
  return absl::OkStatus();
}

absl::Status ParseSummary(absl::string_view data, std::vector<ScalarEvent>* scalars) {
  ProtoReader r(data);
  while (!r.done()) {
    uint32_t field = 0, type = 0;
    if (absl::Status s = r.ReadKey(&field, &type); !s.ok()) return s;
    if (field == kSummaryValueField && type == kLengthDelimited) {
      absl::string_view value;
      if (!r.ReadBytes(&value)) return r.Malformed("truncated Summary.value");
      if (absl::Status s = ParseValue(value, scalars); !s.ok()) {
        return absl::DataLossError(absl::StrCat("in Summary.value: ", s.message()));
      }
    } else if (absl::Status s = r.Skip(type); !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

// Parses one Event, appending its scalars to `file` and taking its
// file_version if `file` has none yet.
absl::Status ParseEvent(absl::string_view data, EventFile* file) {
  ProtoReader r(data);
  double wall_time = 0;
  int64_t step = 0;
  std::vector<ScalarEvent> scalars;
  while (!r.done()) {
    uint32_t field = 0, type = 0;
    if (absl::Status s = r.ReadKey(&field, &type); !s.ok()) return s;
    if (field == kEventWallTimeField && type == kFixed64) {
      uint64_t bits;
      if (!r.ReadFixed64(&bits)) return r.Malformed("truncated Event.wall_time");
      std::memcpy(&wall_time, &bits, sizeof(bits));
    } else if (field == kEventStepField && type == kVarint) {
      uint64_t v;
      if (!r.ReadVarint(&v)) return r.Malformed("bad Event.step");
      step = static_cast<int64_t>(v);
    } else if (field == kEventFileVersionField && type == kLengthDelimited) {
      absl::string_view version;
      if (!r.ReadBytes(&version)) return r.Malformed("truncated Event.file_version");
      if (file->file_version.empty()) file->file_version = std::string(version);
    } else if (field == kEventSummaryField && type == kLengthDelimited) {
      absl::string_view summary;
      if (!r.ReadBytes(&summary)) return r.Malformed("truncated Event.summary");
      if (absl::Status s = ParseSummary(summary, &scalars); !s.ok()) {
        return absl::DataLossError(absl::StrCat("in Event.summary: ", s.message()));
      }
    } else if (absl::Status s = r.Skip(type); !s.ok()) {
      return s;
    }
  }
  // Fields may come in any order, so step and wall_time apply at the end.
  for (ScalarEvent& scalar : scalars) {
    scalar.step = step;
    scalar.wall_time = wall_time;
    file->scalars.push_back(std::move(scalar));
  }
  return absl::OkStatus();
}

// ---- Files -------------------------------------------------------------------

std::string ErrnoText(int err) { return std::strerror(err); }

std::string Hostname() {
  char buf[256] = {};
  if (gethostname(buf, sizeof(buf) - 1) != 0 || buf[0] == '\0') return "localhost";
  std::string host(buf);
  // A file name component must not contain '/'.
  for (char& c : host) {
    if (c == '/') c = '_';
  }
  return host;
}

double NowSeconds() {
  return absl::FDivDuration(absl::Now() - absl::UnixEpoch(), absl::Seconds(1));
}

absl::Status MakeDirs(const std::string& logdir) {
  std::error_code ec;
  std::filesystem::create_directories(logdir, ec);
  // create_directories succeeds when the path exists as a file.
  if (!ec && !std::filesystem::is_directory(logdir, ec) && !ec) {
    ec = std::make_error_code(std::errc::not_a_directory);
  }
  if (!ec) return absl::OkStatus();
  const std::string message = absl::StrCat("cannot create logdir ", logdir, ": ", ec.message());
  if (ec == std::errc::not_a_directory || ec == std::errc::file_exists) {
    return absl::InvalidArgumentError(message);
  }
  return absl::InternalError(message);
}

// Reads the records of an open file of known size, verifying both CRCs.
class RecordFileReader {
 public:
  // `path` is for messages and must outlive the reader; `file` is not owned.
  RecordFileReader(const std::string& path, std::FILE* file, uint64_t size)
      : path_(path), file_(file), size_(size) {}

  // Reads the next record into `data`; sets *eof instead at a clean end of file.
  absl::Status Next(std::string* data, bool* eof) {
    *eof = false;
    record_offset_ = offset_;
    if (offset_ == size_) {
      *eof = true;
      return absl::OkStatus();
    }
    uint8_t header[12];
    const uint64_t left = size_ - offset_;
    if (left < sizeof(header)) return Corrupt("truncated record header");
    if (absl::Status s = ReadExactly(header, sizeof(header)); !s.ok()) return s;
    if (LoadLe32(header + 8) != MaskedCrc32c(header, 8)) return Corrupt("bad length CRC");
    const uint64_t length = LoadLe64(header);
    if (length > left - sizeof(header) || left - sizeof(header) - length < 4) {
      return Corrupt(absl::StrCat("truncated record (length ", length, ", ", left,
                                  " bytes left in the file)"));
    }
    data->resize(length);
    if (absl::Status s = ReadExactly(data->data(), length); !s.ok()) return s;
    uint8_t footer[4];
    if (absl::Status s = ReadExactly(footer, sizeof(footer)); !s.ok()) return s;
    if (LoadLe32(footer) != MaskedCrc32c(data->data(), data->size())) {
      return Corrupt("bad data CRC");
    }
    offset_ += sizeof(header) + length + sizeof(footer);
    return absl::OkStatus();
  }

  // DATA_LOSS naming the file and the offset of the record Next last read.
  absl::Status Corrupt(absl::string_view what) const {
    return absl::DataLossError(
        absl::StrCat(path_, ": ", what, " in record at offset ", record_offset_));
  }

 private:
  absl::Status ReadExactly(void* buf, size_t n) {
    if (n > 0 && std::fread(buf, 1, n, file_) != n) {
      if (std::ferror(file_)) {
        return absl::InternalError(
            absl::StrCat("cannot read ", path_, " in record at offset ", record_offset_));
      }
      return Corrupt("truncated record");  // The file shrank after it was measured.
    }
    return absl::OkStatus();
  }

  const std::string& path_;
  std::FILE* const file_;
  const uint64_t size_;
  uint64_t offset_ = 0;         // Where the next record starts.
  uint64_t record_offset_ = 0;  // Where the record Next last read starts.
};

}  // namespace

uint32_t Crc32cExtend(uint32_t crc, const void* data, size_t n) {
  const auto& t = kCrc32cTables.t;
  const uint8_t* p = static_cast<const uint8_t*>(data);
  crc = ~crc;
  for (; n >= 8; n -= 8, p += 8) {
    const uint32_t lo = crc ^ LoadLe32(p);
    const uint32_t hi = LoadLe32(p + 4);
    crc = t[7][lo & 0xff] ^ t[6][(lo >> 8) & 0xff] ^ t[5][(lo >> 16) & 0xff] ^ t[4][lo >> 24] ^
          t[3][hi & 0xff] ^ t[2][(hi >> 8) & 0xff] ^ t[1][(hi >> 16) & 0xff] ^ t[0][hi >> 24];
  }
  for (; n > 0; --n, ++p) crc = (crc >> 8) ^ t[0][(crc ^ *p) & 0xff];
  return ~crc;
}

uint32_t Crc32c(const void* data, size_t n) { return Crc32cExtend(0, data, n); }

uint32_t MaskedCrc32c(const void* data, size_t n) { return Mask(Crc32c(data, n)); }

std::string EncodeRecord(absl::string_view data) {
  std::string out;
  out.reserve(16 + data.size());
  PutLe64(&out, data.size());
  PutLe32(&out, MaskedCrc32c(out.data(), 8));
  out.append(data.data(), data.size());
  PutLe32(&out, MaskedCrc32c(data.data(), data.size()));
  return out;
}

std::string EncodeFileVersionEvent(double wall_time) {
  std::string event;
  PutWallTime(&event, wall_time);
  PutBytesField(&event, kEventFileVersionField, kEventFileVersion);
  return event;
}

std::string EncodeScalarEvent(absl::string_view tag, int64_t step, float value, double wall_time) {
  std::string value_msg;
  PutBytesField(&value_msg, kValueTagField, tag);
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  PutKey(&value_msg, kValueSimpleValueField, kFixed32);
  PutLe32(&value_msg, bits);

  std::string summary;
  PutBytesField(&summary, kSummaryValueField, value_msg);

  std::string event;
  PutWallTime(&event, wall_time);
  if (step != 0) {
    PutKey(&event, kEventStepField, kVarint);
    PutVarint(&event, static_cast<uint64_t>(step));
  }
  PutBytesField(&event, kEventSummaryField, summary);
  return event;
}

absl::StatusOr<std::unique_ptr<EventWriter>> EventWriter::Create(const std::string& logdir) {
  if (logdir.empty()) return absl::InvalidArgumentError("empty logdir");
  if (absl::Status s = MakeDirs(logdir); !s.ok()) return s;

  const double now = NowSeconds();
  const std::string base =
      absl::StrCat(logdir, "/events.out.tfevents.", static_cast<int64_t>(now), ".", Hostname());
  constexpr int kMaxAttempts = 1000;
  for (int attempt = 0; attempt < kMaxAttempts; ++attempt) {
    std::string path = attempt == 0 ? base : absl::StrCat(base, ".", attempt);
    const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) {
      const int err = errno;
      if (err == EEXIST) continue;
      return absl::InternalError(
          absl::StrCat("cannot create event file ", path, ": ", ErrnoText(err)));
    }
    std::FILE* file = fdopen(fd, "wb");
    if (file == nullptr) {
      const int err = errno;
      close(fd);
      return absl::InternalError(
          absl::StrCat("cannot open event file ", path, ": ", ErrnoText(err)));
    }
    std::unique_ptr<EventWriter> writer(new EventWriter(std::move(path), file));
    if (absl::Status s = writer->WriteRecord(EncodeFileVersionEvent(now)); !s.ok()) return s;
    if (absl::Status s = writer->Flush(); !s.ok()) return s;
    return writer;
  }
  return absl::InternalError(
      absl::StrCat("cannot create event file ", base, ": ", kMaxAttempts, " names taken"));
}

EventWriter::~EventWriter() { Close().IgnoreError(); }

absl::Status EventWriter::AddScalar(const std::string& tag, int64_t step, float value) {
  return AddScalar(tag, step, value, NowSeconds());
}

absl::Status EventWriter::AddScalar(const std::string& tag, int64_t step, float value,
                                    double wall_time) {
  if (tag.empty()) return absl::InvalidArgumentError(absl::StrCat(path_, ": empty scalar tag"));
  return WriteRecord(EncodeScalarEvent(tag, step, value, wall_time));
}

absl::Status EventWriter::WriteRecord(absl::string_view event) {
  if (!error_.ok()) return error_;
  if (file_ == nullptr) return absl::FailedPreconditionError(absl::StrCat(path_, " is closed"));
  const std::string record = EncodeRecord(event);
  if (std::fwrite(record.data(), 1, record.size(), file_) != record.size()) {
    return Fail(absl::InternalError(absl::StrCat("cannot write ", path_, ": ", ErrnoText(errno))));
  }
  return absl::OkStatus();
}

absl::Status EventWriter::Flush() {
  if (!error_.ok()) return error_;
  if (file_ == nullptr) return absl::FailedPreconditionError(absl::StrCat(path_, " is closed"));
  if (std::fflush(file_) != 0) {
    return Fail(absl::InternalError(absl::StrCat("cannot flush ", path_, ": ", ErrnoText(errno))));
  }
  if (fsync(fileno(file_)) != 0) {
    return Fail(absl::InternalError(absl::StrCat("cannot fsync ", path_, ": ", ErrnoText(errno))));
  }
  return absl::OkStatus();
}

absl::Status EventWriter::Close() {
  if (file_ == nullptr) return error_;
  absl::Status status = error_.ok() ? Flush() : error_;
  if (std::fclose(file_) != 0 && status.ok()) {
    status =
        Fail(absl::InternalError(absl::StrCat("cannot close ", path_, ": ", ErrnoText(errno))));
  }
  file_ = nullptr;
  return status;
}

absl::Status EventWriter::Fail(absl::Status status) {
  error_ = status;
  return status;
}

absl::StatusOr<EventFile> ReadEventFile(const std::string& path) {
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) {
    const int err = errno;
    const std::string message = absl::StrCat("cannot open ", path, ": ", ErrnoText(err));
    return err == ENOENT ? absl::NotFoundError(message) : absl::InternalError(message);
  }
  // Closes `file` on every return.
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> closer(file, &std::fclose);

  struct stat st;
  if (fstat(fileno(file), &st) != 0) {
    return absl::InternalError(absl::StrCat("cannot stat ", path, ": ", ErrnoText(errno)));
  }
  if (!S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat(path, " is not a regular file"));
  }

  RecordFileReader reader(path, file, static_cast<uint64_t>(st.st_size));
  EventFile result;
  std::string data;
  while (true) {
    bool eof;
    if (absl::Status s = reader.Next(&data, &eof); !s.ok()) return s;
    if (eof) break;
    if (absl::Status s = ParseEvent(data, &result); !s.ok()) {
      return reader.Corrupt(absl::StrCat("malformed Event (", s.message(), ")"));
    }
  }
  return result;
}

}  // namespace summary
}  // namespace psc
