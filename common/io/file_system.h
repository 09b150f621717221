// The one seam between pscluster and the file system (leveldb's Env, reduced
// to what pscluster needs). Checkpoints, TensorBoard event files, result
// files and the evaluator's records all go through a FileSystem, so a test
// can make any write fail (faulty_file_system.h) and see what the caller
// does with it.
//
// Errors name the operation and the path, e.g. "rename /ckpt/x.tmp.1.0 to
// /ckpt/x: Is a directory": NOT_FOUND for what does not exist,
// INVALID_ARGUMENT for a path whose parent is not a directory, INTERNAL for
// every other failure of the OS.
#ifndef PSC_COMMON_IO_FILE_SYSTEM_H_
#define PSC_COMMON_IO_FILE_SYSTEM_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace psc {
namespace io {

// A file open for reads at any offset (pread), without holding it in
// memory. It stays the file it was when opened: a rename over its path or
// an unlink (a checkpoint pruned or overwritten) does not change what it
// reads. Thread-safe; destruction closes it.
class RandomAccessFile {
 public:
  virtual ~RandomAccessFile() = default;
  // Bytes [offset, offset + n) into `out`. OUT_OF_RANGE, naming the file,
  // when they are not all in it; INTERNAL for an error of the OS.
  virtual absl::Status Read(uint64_t offset, size_t n, char* out) const = 0;
  // Its size when opened.
  virtual uint64_t size() const = 0;
  virtual const std::string& path() const = 0;
};

// A file written from its start, in order, through a buffer in the process.
// Thread-compatible. Destruction closes it, dropping errors: call Close.
class WritableFile {
 public:
  virtual ~WritableFile() = default;
  // Appends to the buffer; it goes to the OS when full, on Flush and Close.
  virtual absl::Status Append(absl::string_view data) = 0;
  // Hands the buffer to the OS.
  virtual absl::Status Flush() = 0;
  // Flush, then fsync: the bytes are durable.
  virtual absl::Status Sync() = 0;
  // Flush and close. After it every call is FAILED_PRECONDITION; a second
  // Close is OK.
  virtual absl::Status Close() = 0;
  virtual const std::string& path() const = 0;
};

enum class FileType { kMissing, kFile, kDirectory, kOther };

enum class OpenMode {
  kCreateNew,  // ALREADY_EXISTS if the file exists
  kAppend,     // creates the file or appends to it
};

// Implementations are thread-safe.
class FileSystem {
 public:
  virtual ~FileSystem() = default;

  // mkdir -p, tolerating concurrent creators; when it creates a directory it
  // fsyncs the parent, so the new entry is durable. INVALID_ARGUMENT when
  // `path` or one of its parents exists and is not a directory.
  virtual absl::Status MakeDirs(const std::string& path) = 0;

  // Durably replaces the file `path` with `data`: a temporary file beside it
  // ("<path>.tmp.<pid>.<counter>") written and fsync'ed, renamed over
  // `path`, then the directory fsync'ed. A crash leaves the old file or the
  // new one, never a mix. On failure the temporary file is removed; after a
  // failed directory fsync the new file is in place but not known durable.
  virtual absl::Status WriteFileAtomically(const std::string& path, absl::string_view data) = 0;

  virtual absl::StatusOr<std::unique_ptr<WritableFile>> OpenForWrite(const std::string& path,
                                                                     OpenMode mode) = 0;

  // The whole file. NOT_FOUND if it does not exist.
  virtual absl::StatusOr<std::string> ReadFile(const std::string& path) = 0;
  // The file open for reads by range. NOT_FOUND if it does not exist.
  virtual absl::StatusOr<std::unique_ptr<RandomAccessFile>> OpenForRead(
      const std::string& path) = 0;
  // Its size in bytes. NOT_FOUND if it does not exist.
  virtual absl::StatusOr<uint64_t> FileSize(const std::string& path) = 0;
  virtual absl::StatusOr<FileType> Type(const std::string& path) = 0;

  // The names in `dir` (not "." or ".."), in no order. A missing directory
  // has none.
  virtual absl::StatusOr<std::vector<std::string>> ListDir(const std::string& dir) = 0;

  // Removes a file; OK if it is already gone.
  virtual absl::Status RemoveFile(const std::string& path) = 0;
  // Removes a directory if it is empty; OK if it is gone or not empty.
  virtual absl::Status RemoveDirIfEmpty(const std::string& path) = 0;
  // Makes the entries of `dir` durable (fsync of the directory).
  virtual absl::Status SyncDir(const std::string& dir) = 0;
};

// The local file system (POSIX). Stateless; thread-safe; never null.
FileSystem* LocalFileSystem();

// "<dir>/<name>", with no doubled '/' when `dir` ends with one.
std::string JoinPath(absl::string_view dir, absl::string_view name);

}  // namespace io
}  // namespace psc

#endif  // PSC_COMMON_IO_FILE_SYSTEM_H_
