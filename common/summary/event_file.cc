#include "common/summary/event_file.h"

#include <unistd.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/base/status_macros.h"
#include "common/summary/tf_record.h"
#include "proto/tensorboard.pb.h"

namespace psc {
namespace summary {
namespace {

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

// The wall time TensorBoard plots against: the system clock, which is what
// the file's readers compare it with.
double NowSeconds() {
  return absl::FDivDuration(absl::Now() - absl::UnixEpoch(), absl::Seconds(1));
}

io::FileSystem* OrLocal(io::FileSystem* fs) { return fs != nullptr ? fs : io::LocalFileSystem(); }

}  // namespace

std::string EncodeFileVersionEvent(double wall_time) {
  tensorboard::Event event;
  event.set_wall_time(wall_time);
  event.set_file_version(std::string(kEventFileVersion));
  return event.SerializeAsString();
}

std::string EncodeScalarEvent(absl::string_view tag, int64_t step, float value, double wall_time) {
  tensorboard::Event event;
  event.set_wall_time(wall_time);
  event.set_step(step);
  tensorboard::Summary::Value* v = event.mutable_summary()->add_value();
  v->set_tag(std::string(tag));
  v->set_simple_value(value);
  return event.SerializeAsString();
}

absl::StatusOr<std::unique_ptr<EventWriter>> EventWriter::Create(const std::string& logdir,
                                                                 io::FileSystem* fs) {
  fs = OrLocal(fs);
  if (logdir.empty()) return absl::InvalidArgumentError("empty logdir");
  if (absl::Status s = fs->MakeDirs(logdir); !s.ok()) {
    return absl::Status(s.code() == absl::StatusCode::kInvalidArgument
                            ? absl::StatusCode::kInvalidArgument
                            : absl::StatusCode::kInternal,
                        absl::StrCat("cannot create logdir ", logdir, ": ", s.message()));
  }
  const double now = NowSeconds();
  const std::string base =
      absl::StrCat(logdir, "/events.out.tfevents.", static_cast<int64_t>(now), ".", Hostname());
  constexpr int kMaxAttempts = 1000;
  for (int attempt = 0; attempt < kMaxAttempts; ++attempt) {
    std::string path = attempt == 0 ? base : absl::StrCat(base, ".", attempt);
    auto file = fs->OpenForWrite(path, io::OpenMode::kCreateNew);
    if (absl::IsAlreadyExists(file.status())) continue;
    if (!file.ok()) {
      return absl::InternalError(
          absl::StrCat("cannot create event file ", path, ": ", file.status().message()));
    }
    std::unique_ptr<EventWriter> writer(new EventWriter(std::move(path), *std::move(file)));
    PSC_RETURN_IF_ERROR(writer->WriteRecord(EncodeFileVersionEvent(now)));
    PSC_RETURN_IF_ERROR(writer->Flush());
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
  if (absl::Status s = file_->Append(EncodeRecord(event)); !s.ok()) {
    return Fail(absl::InternalError(absl::StrCat("cannot write ", path_, ": ", s.message())));
  }
  return absl::OkStatus();
}

absl::Status EventWriter::Flush() {
  if (!error_.ok()) return error_;
  if (file_ == nullptr) return absl::FailedPreconditionError(absl::StrCat(path_, " is closed"));
  if (absl::Status s = file_->Sync(); !s.ok()) {
    return Fail(absl::InternalError(absl::StrCat("cannot flush ", path_, ": ", s.message())));
  }
  return absl::OkStatus();
}

absl::Status EventWriter::Close() {
  if (file_ == nullptr) return error_;
  absl::Status status = error_.ok() ? Flush() : error_;
  if (absl::Status s = file_->Close(); !s.ok() && status.ok()) {
    status = Fail(absl::InternalError(absl::StrCat("cannot close ", path_, ": ", s.message())));
  }
  file_.reset();
  return status;
}

absl::Status EventWriter::Fail(absl::Status status) {
  error_ = status;
  return status;
}

absl::StatusOr<EventFile> ReadEventFile(const std::string& path, io::FileSystem* fs) {
  fs = OrLocal(fs);
  PSC_ASSIGN_OR_RETURN(const io::FileType type, fs->Type(path));
  if (type == io::FileType::kMissing) {
    return absl::NotFoundError(absl::StrCat("cannot open ", path, ": no such file"));
  }
  if (type != io::FileType::kFile) {
    return absl::InvalidArgumentError(absl::StrCat(path, " is not a regular file"));
  }
  PSC_ASSIGN_OR_RETURN(const std::string bytes, fs->ReadFile(path));
  return ParseEventFile(path, bytes);
}

absl::StatusOr<EventFile> ParseEventFile(absl::string_view name, absl::string_view bytes) {
  RecordReader reader(name, bytes);
  EventFile result;
  tensorboard::Event event;
  for (;;) {
    absl::string_view data;
    bool end = false;
    PSC_RETURN_IF_ERROR(reader.Next(&data, &end));
    if (end) break;
    if (!event.ParseFromArray(data.data(), static_cast<int>(data.size()))) {
      return reader.Corrupt("malformed Event (it does not parse)");
    }
    if (event.has_file_version() && result.file_version.empty()) {
      result.file_version = event.file_version();
    }
    for (const tensorboard::Summary::Value& v : event.summary().value()) {
      if (!v.has_simple_value()) continue;
      result.scalars.push_back(
          ScalarEvent{v.tag(), event.step(), v.simple_value(), event.wall_time()});
    }
  }
  return result;
}

}  // namespace summary
}  // namespace psc
