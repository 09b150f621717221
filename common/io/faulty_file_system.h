// A FileSystem for tests that fails chosen writes: a rule names the kind of
// operation, a part of the path, and how many matching calls succeed first.
// Everything else goes to the wrapped file system.
#ifndef PSC_COMMON_IO_FAULTY_FILE_SYSTEM_H_
#define PSC_COMMON_IO_FAULTY_FILE_SYSTEM_H_

#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/io/file_system.h"

namespace psc {
namespace io {

enum class Op {
  kMakeDirs,
  kWriteAtomically,  // WriteFileAtomically
  kOpen,             // OpenForWrite
  kAppend,           // WritableFile::Append and Flush
  kSync,             // WritableFile::Sync and SyncDir
  kRemove,           // RemoveFile and RemoveDirIfEmpty
  kRead,             // ReadFile, FileSize, OpenForRead and its reads
};

// Thread-safe.
class FaultyFileSystem : public FileSystem {
 public:
  // `base` is not owned (LocalFileSystem() when null).
  explicit FaultyFileSystem(FileSystem* base = nullptr)
      : base_(base != nullptr ? base : LocalFileSystem()) {}

  // Calls of `op` on a path containing `path_part` fail with `error` once
  // `after` of them have succeeded.
  void Fail(Op op, std::string path_part, absl::Status error, int after = 0)
      ABSL_LOCKS_EXCLUDED(mu_);
  // How many calls a rule failed so far.
  int failures() const ABSL_LOCKS_EXCLUDED(mu_);

  absl::Status MakeDirs(const std::string& path) override;
  absl::Status WriteFileAtomically(const std::string& path, absl::string_view data) override;
  absl::StatusOr<std::unique_ptr<WritableFile>> OpenForWrite(const std::string& path,
                                                             OpenMode mode) override;
  absl::StatusOr<std::string> ReadFile(const std::string& path) override;
  absl::StatusOr<std::unique_ptr<RandomAccessFile>> OpenForRead(const std::string& path) override;
  absl::StatusOr<uint64_t> FileSize(const std::string& path) override;
  absl::StatusOr<FileType> Type(const std::string& path) override;
  absl::StatusOr<std::vector<std::string>> ListDir(const std::string& dir) override;
  absl::Status RemoveFile(const std::string& path) override;
  absl::Status RemoveDirIfEmpty(const std::string& path) override;
  absl::Status SyncDir(const std::string& dir) override;

  // The injected error for `op` on `path`, or OK (counts the call).
  absl::Status Check(Op op, const std::string& path) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Rule {
    Op op;
    std::string path_part;
    absl::Status error;
    int after;
  };
  FileSystem* const base_;
  mutable absl::Mutex mu_;
  std::vector<Rule> rules_ ABSL_GUARDED_BY(mu_);
  int failures_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace io
}  // namespace psc

#endif  // PSC_COMMON_IO_FAULTY_FILE_SYSTEM_H_
