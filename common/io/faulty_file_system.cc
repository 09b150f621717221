#include "common/io/faulty_file_system.h"

#include <utility>

namespace psc {
namespace io {
namespace {

// A file whose appends, flushes and syncs pass through the rules.
class FaultyWritableFile : public WritableFile {
 public:
  FaultyWritableFile(FaultyFileSystem* fs, std::unique_ptr<WritableFile> base)
      : fs_(fs), base_(std::move(base)) {}
  absl::Status Append(absl::string_view data) override {
    if (absl::Status s = fs_->Check(Op::kAppend, path()); !s.ok()) return s;
    return base_->Append(data);
  }
  absl::Status Flush() override {
    if (absl::Status s = fs_->Check(Op::kAppend, path()); !s.ok()) return s;
    return base_->Flush();
  }
  absl::Status Sync() override {
    if (absl::Status s = fs_->Check(Op::kSync, path()); !s.ok()) return s;
    return base_->Sync();
  }
  absl::Status Close() override { return base_->Close(); }
  const std::string& path() const override { return base_->path(); }

 private:
  FaultyFileSystem* const fs_;
  const std::unique_ptr<WritableFile> base_;
};

}  // namespace

void FaultyFileSystem::Fail(Op op, std::string path_part, absl::Status error, int after) {
  absl::MutexLock lock(&mu_);
  rules_.push_back(Rule{op, std::move(path_part), std::move(error), after});
}

int FaultyFileSystem::failures() const {
  absl::MutexLock lock(&mu_);
  return failures_;
}

absl::Status FaultyFileSystem::Check(Op op, const std::string& path) {
  absl::MutexLock lock(&mu_);
  for (Rule& r : rules_) {
    if (r.op != op || path.find(r.path_part) == std::string::npos) continue;
    if (r.after > 0) {
      --r.after;
      continue;
    }
    ++failures_;
    return r.error;
  }
  return absl::OkStatus();
}

absl::Status FaultyFileSystem::MakeDirs(const std::string& path) {
  if (absl::Status s = Check(Op::kMakeDirs, path); !s.ok()) return s;
  return base_->MakeDirs(path);
}

absl::Status FaultyFileSystem::WriteFileAtomically(const std::string& path,
                                                   absl::string_view data) {
  if (absl::Status s = Check(Op::kWriteAtomically, path); !s.ok()) return s;
  return base_->WriteFileAtomically(path, data);
}

absl::StatusOr<std::unique_ptr<WritableFile>> FaultyFileSystem::OpenForWrite(
    const std::string& path, OpenMode mode) {
  if (absl::Status s = Check(Op::kOpen, path); !s.ok()) return s;
  auto file = base_->OpenForWrite(path, mode);
  if (!file.ok()) return file.status();
  return std::unique_ptr<WritableFile>(new FaultyWritableFile(this, *std::move(file)));
}

absl::StatusOr<std::string> FaultyFileSystem::ReadFile(const std::string& path) {
  if (absl::Status s = Check(Op::kRead, path); !s.ok()) return s;
  return base_->ReadFile(path);
}

absl::StatusOr<uint64_t> FaultyFileSystem::FileSize(const std::string& path) {
  if (absl::Status s = Check(Op::kRead, path); !s.ok()) return s;
  return base_->FileSize(path);
}

absl::StatusOr<FileType> FaultyFileSystem::Type(const std::string& path) {
  return base_->Type(path);
}

absl::StatusOr<std::vector<std::string>> FaultyFileSystem::ListDir(const std::string& dir) {
  return base_->ListDir(dir);
}

absl::Status FaultyFileSystem::RemoveFile(const std::string& path) {
  if (absl::Status s = Check(Op::kRemove, path); !s.ok()) return s;
  return base_->RemoveFile(path);
}

absl::Status FaultyFileSystem::RemoveDirIfEmpty(const std::string& path) {
  if (absl::Status s = Check(Op::kRemove, path); !s.ok()) return s;
  return base_->RemoveDirIfEmpty(path);
}

absl::Status FaultyFileSystem::SyncDir(const std::string& dir) {
  if (absl::Status s = Check(Op::kSync, dir); !s.ok()) return s;
  return base_->SyncDir(dir);
}

}  // namespace io
}  // namespace psc
