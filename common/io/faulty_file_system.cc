#include "common/io/faulty_file_system.h"

#include <utility>

#include "common/base/status_macros.h"

namespace psc {
namespace io {
namespace {

// A file whose appends, flushes and syncs pass through the rules.
class FaultyWritableFile : public WritableFile {
 public:
  FaultyWritableFile(FaultyFileSystem* fs, std::unique_ptr<WritableFile> base)
      : fs_(fs), base_(std::move(base)) {}
  absl::Status Append(absl::string_view data) override {
    PSC_RETURN_IF_ERROR(fs_->Check(Op::kAppend, path()));
    return base_->Append(data);
  }
  absl::Status Flush() override {
    PSC_RETURN_IF_ERROR(fs_->Check(Op::kAppend, path()));
    return base_->Flush();
  }
  absl::Status Sync() override {
    PSC_RETURN_IF_ERROR(fs_->Check(Op::kSync, path()));
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
  PSC_RETURN_IF_ERROR(Check(Op::kMakeDirs, path));
  return base_->MakeDirs(path);
}

absl::Status FaultyFileSystem::WriteFileAtomically(const std::string& path,
                                                   absl::string_view data) {
  PSC_RETURN_IF_ERROR(Check(Op::kWriteAtomically, path));
  return base_->WriteFileAtomically(path, data);
}

absl::StatusOr<std::unique_ptr<WritableFile>> FaultyFileSystem::OpenForWrite(
    const std::string& path, OpenMode mode) {
  PSC_RETURN_IF_ERROR(Check(Op::kOpen, path));
  PSC_ASSIGN_OR_RETURN(auto file, base_->OpenForWrite(path, mode));
  return std::unique_ptr<WritableFile>(new FaultyWritableFile(this, std::move(file)));
}

absl::StatusOr<std::string> FaultyFileSystem::ReadFile(const std::string& path) {
  PSC_RETURN_IF_ERROR(Check(Op::kRead, path));
  return base_->ReadFile(path);
}

namespace {

// Reads through `base`, each failing as the rules of kRead say.
class FaultyRandomAccessFile : public RandomAccessFile {
 public:
  FaultyRandomAccessFile(FaultyFileSystem* fs, std::unique_ptr<RandomAccessFile> base)
      : fs_(fs), base_(std::move(base)) {}
  absl::Status Read(uint64_t offset, size_t n, char* out) const override {
    PSC_RETURN_IF_ERROR(fs_->Check(Op::kRead, base_->path()));
    return base_->Read(offset, n, out);
  }
  uint64_t size() const override { return base_->size(); }
  const std::string& path() const override { return base_->path(); }

 private:
  FaultyFileSystem* fs_;
  std::unique_ptr<RandomAccessFile> base_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<RandomAccessFile>> FaultyFileSystem::OpenForRead(
    const std::string& path) {
  PSC_RETURN_IF_ERROR(Check(Op::kRead, path));
  PSC_ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessFile> base, base_->OpenForRead(path));
  return std::unique_ptr<RandomAccessFile>(new FaultyRandomAccessFile(this, std::move(base)));
}

absl::StatusOr<uint64_t> FaultyFileSystem::FileSize(const std::string& path) {
  PSC_RETURN_IF_ERROR(Check(Op::kRead, path));
  return base_->FileSize(path);
}

absl::StatusOr<FileType> FaultyFileSystem::Type(const std::string& path) {
  return base_->Type(path);
}

absl::StatusOr<std::vector<std::string>> FaultyFileSystem::ListDir(const std::string& dir) {
  return base_->ListDir(dir);
}

absl::Status FaultyFileSystem::RemoveFile(const std::string& path) {
  PSC_RETURN_IF_ERROR(Check(Op::kRemove, path));
  return base_->RemoveFile(path);
}

absl::Status FaultyFileSystem::RemoveDirIfEmpty(const std::string& path) {
  PSC_RETURN_IF_ERROR(Check(Op::kRemove, path));
  return base_->RemoveDirIfEmpty(path);
}

absl::Status FaultyFileSystem::SyncDir(const std::string& dir) {
  PSC_RETURN_IF_ERROR(Check(Op::kSync, dir));
  return base_->SyncDir(dir);
}

}  // namespace io
}  // namespace psc
