// LocalFileSystem(): the FileSystem of common/io/file_system.h over POSIX.
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <memory>
#include <string>
#include <system_error>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"
#include "common/io/file_system.h"

namespace psc {
namespace io {
namespace {

std::string ErrnoText(int err) { return std::generic_category().message(err); }

absl::Status IoError(absl::string_view op, absl::string_view path, int err) {
  const std::string message = absl::StrCat(op, " ", path, ": ", ErrnoText(err));
  if (err == ENOENT) return absl::NotFoundError(message);
  if (err == ENOTDIR) return absl::InvalidArgumentError(message);
  return absl::InternalError(message);
}

int CloseFd(int fd) {
  // Linux closes the descriptor even when close() fails with EINTR; do not
  // retry, but report it.
  return ::close(fd) == 0 ? 0 : errno;
}

// Writes all of `data` to `fd`, retrying partial writes and EINTR. Returns 0
// or an errno value.
int WriteAll(int fd, absl::string_view data) {
  const char* p = data.data();
  size_t left = data.size();
  while (left > 0) {
    const size_t chunk = std::min<size_t>(left, size_t{1} << 30);
    const ssize_t n = ::write(fd, p, chunk);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (n == 0) return EIO;
    p += n;
    left -= static_cast<size_t>(n);
  }
  return 0;
}

int FsyncFd(int fd) {
  while (::fsync(fd) != 0) {
    if (errno != EINTR) return errno;
  }
  return 0;
}

std::string Parent(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

// Next temporary name for `final_path`: "<final>.tmp.<pid>.<counter>".
std::string TempName(const std::string& final_path) {
  static std::atomic<uint64_t> counter{0};
  return absl::StrCat(final_path, ".tmp.", ::getpid(), ".", counter.fetch_add(1));
}

class PosixWritableFile : public WritableFile {
 public:
  PosixWritableFile(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  ~PosixWritableFile() override { Close().IgnoreError(); }

  absl::Status Append(absl::string_view data) override {
    if (fd_ < 0) return Closed();
    buffer_.append(data.data(), data.size());
    if (buffer_.size() >= kBufferBytes) return Flush();
    return absl::OkStatus();
  }
  absl::Status Flush() override {
    if (fd_ < 0) return Closed();
    const int err = WriteAll(fd_, buffer_);
    buffer_.clear();
    return err == 0 ? absl::OkStatus() : IoError("write", path_, err);
  }
  absl::Status Sync() override {
    PSC_RETURN_IF_ERROR(Flush());
    const int err = FsyncFd(fd_);
    return err == 0 ? absl::OkStatus() : IoError("fsync", path_, err);
  }
  absl::Status Close() override {
    if (fd_ < 0) return absl::OkStatus();
    absl::Status s = Flush();
    const int err = CloseFd(fd_);
    fd_ = -1;
    if (s.ok() && err != 0) s = IoError("close", path_, err);
    return s;
  }
  const std::string& path() const override { return path_; }

 private:
  static constexpr size_t kBufferBytes = 64 << 10;
  absl::Status Closed() const {
    return absl::FailedPreconditionError(absl::StrCat(path_, " is closed"));
  }
  const std::string path_;
  int fd_;
  std::string buffer_;
};

class PosixRandomAccessFile : public RandomAccessFile {
 public:
  PosixRandomAccessFile(int fd, uint64_t size, std::string path)
      : fd_(fd), size_(size), path_(std::move(path)) {}
  ~PosixRandomAccessFile() override { CloseFd(fd_); }
  absl::Status Read(uint64_t offset, size_t n, char* out) const override {
    if (offset > size_ || n > size_ - offset) {
      return absl::OutOfRangeError(
          absl::StrCat("read ", path_, ": bytes [", offset, ", ", offset + n, ") of ", size_));
    }
    while (n > 0) {
      const ssize_t got =
          ::pread(fd_, out, std::min<size_t>(n, size_t{1} << 30), static_cast<off_t>(offset));
      if (got < 0 && errno == EINTR) continue;
      if (got < 0) return IoError("read", path_, errno);
      if (got == 0) {
        return absl::OutOfRangeError(
            absl::StrCat("read ", path_, ": ended at ", offset, " of ", size_, " bytes"));
      }
      out += got;
      offset += static_cast<uint64_t>(got);
      n -= static_cast<size_t>(got);
    }
    return absl::OkStatus();
  }
  uint64_t size() const override { return size_; }
  const std::string& path() const override { return path_; }

 private:
  const int fd_;
  const uint64_t size_;
  const std::string path_;
};

class PosixFileSystem : public FileSystem {
 public:
  absl::Status MakeDirs(const std::string& path) override {
    if (path.empty()) return absl::InvalidArgumentError("empty directory name");
    struct stat st;
    if (::stat(path.c_str(), &st) == 0) {
      if (S_ISDIR(st.st_mode)) return absl::OkStatus();
      return absl::InvalidArgumentError(
          absl::StrCat("create directory ", path, ": ", ErrnoText(ENOTDIR)));
    }
    if (errno == ENOTDIR) return IoError("create directory", path, ENOTDIR);
    const std::string parent = Parent(path);
    if (parent != path) {
      PSC_RETURN_IF_ERROR(MakeDirs(parent));
    }
    if (::mkdir(path.c_str(), 0755) != 0) {
      const int err = errno;
      if (err == EEXIST && ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
        return absl::OkStatus();  // another creator was first
      }
      if (err == EEXIST) return IoError("create directory", path, ENOTDIR);
      return IoError("create directory", path, err);
    }
    return SyncDir(parent);
  }

  absl::Status WriteFileAtomically(const std::string& path, absl::string_view data) override {
    std::string temp;
    int fd = -1;
    // O_EXCL guards against a stale temp file left by a crashed process whose
    // pid was reused; skip such names.
    for (int attempt = 0; attempt < 16 && fd < 0; ++attempt) {
      temp = TempName(path);
      fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
      if (fd < 0 && errno != EEXIST) return IoError("create", temp, errno);
    }
    if (fd < 0) return IoError("create", temp, EEXIST);
    absl::Status status;
    if (const int err = WriteAll(fd, data); err != 0) {
      status = IoError("write", temp, err);
    } else if (const int err = FsyncFd(fd); err != 0) {
      status = IoError("fsync", temp, err);
    }
    const int close_err = CloseFd(fd);
    if (status.ok() && close_err != 0) status = IoError("close", temp, close_err);
    if (status.ok() && ::rename(temp.c_str(), path.c_str()) != 0) {
      status =
          absl::InternalError(absl::StrCat("rename ", temp, " to ", path, ": ", ErrnoText(errno)));
    }
    if (!status.ok()) {
      ::unlink(temp.c_str());
      return status;
    }
    return SyncDir(Parent(path));
  }

  absl::StatusOr<std::unique_ptr<WritableFile>> OpenForWrite(const std::string& path,
                                                             OpenMode mode) override {
    const int flags =
        O_WRONLY | O_CREAT | O_CLOEXEC | (mode == OpenMode::kCreateNew ? O_EXCL : O_APPEND);
    const int fd = ::open(path.c_str(), flags, 0644);
    if (fd < 0) {
      if (errno == EEXIST) return absl::AlreadyExistsError(absl::StrCat(path, " exists"));
      return IoError("create", path, errno);
    }
    return std::unique_ptr<WritableFile>(new PosixWritableFile(path, fd));
  }

  absl::StatusOr<std::string> ReadFile(const std::string& path) override {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return IoError("open", path, errno);
    std::string out;
    char buf[1 << 16];
    int err = 0;
    for (;;) {
      const ssize_t n = ::read(fd, buf, sizeof(buf));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        err = errno;
        break;
      }
      if (n == 0) break;
      out.append(buf, static_cast<size_t>(n));
    }
    CloseFd(fd);
    if (err != 0) return IoError("read", path, err);
    return out;
  }

  absl::StatusOr<std::unique_ptr<RandomAccessFile>> OpenForRead(const std::string& path) override {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return IoError("open", path, errno);
    struct stat st;
    if (::fstat(fd, &st) != 0) {
      const int err = errno;
      CloseFd(fd);
      return IoError("stat", path, err);
    }
    return std::unique_ptr<RandomAccessFile>(
        new PosixRandomAccessFile(fd, static_cast<uint64_t>(st.st_size), path));
  }

  absl::StatusOr<uint64_t> FileSize(const std::string& path) override {
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) return IoError("stat", path, errno);
    return static_cast<uint64_t>(st.st_size);
  }

  absl::StatusOr<FileType> Type(const std::string& path) override {
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) {
      if (errno == ENOENT || errno == ENOTDIR) return FileType::kMissing;
      return IoError("stat", path, errno);
    }
    if (S_ISREG(st.st_mode)) return FileType::kFile;
    if (S_ISDIR(st.st_mode)) return FileType::kDirectory;
    return FileType::kOther;
  }

  absl::StatusOr<std::vector<std::string>> ListDir(const std::string& dir) override {
    std::vector<std::string> names;
    DIR* d = ::opendir(dir.c_str());
    if (d == nullptr) {
      if (errno == ENOENT) return names;
      return IoError("list", dir, errno);
    }
    errno = 0;
    while (const dirent* e = ::readdir(d)) {
      const std::string name = e->d_name;
      if (name != "." && name != "..") names.push_back(name);
    }
    const int err = errno;
    ::closedir(d);
    if (err != 0) return IoError("list", dir, err);
    return names;
  }

  absl::Status RemoveFile(const std::string& path) override {
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) return IoError("remove", path, errno);
    return absl::OkStatus();
  }

  absl::Status RemoveDirIfEmpty(const std::string& path) override {
    if (::rmdir(path.c_str()) != 0 && errno != ENOTEMPTY && errno != EEXIST && errno != ENOENT) {
      return IoError("remove directory", path, errno);
    }
    return absl::OkStatus();
  }

  absl::Status SyncDir(const std::string& dir) override {
    const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return IoError("open directory", dir, errno);
    const int err = FsyncFd(fd);
    const int close_err = CloseFd(fd);
    if (err != 0) return IoError("fsync directory", dir, err);
    if (close_err != 0) return IoError("close directory", dir, close_err);
    return absl::OkStatus();
  }
};

}  // namespace

FileSystem* LocalFileSystem() {
  static PosixFileSystem* const fs = new PosixFileSystem();  // stateless
  return fs;
}

std::string JoinPath(absl::string_view dir, absl::string_view name) {
  if (!dir.empty() && dir.back() == '/') return absl::StrCat(dir, name);
  return absl::StrCat(dir, "/", name);
}

}  // namespace io
}  // namespace psc
