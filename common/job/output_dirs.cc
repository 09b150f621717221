#include "common/job/output_dirs.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"

namespace psc {
namespace job {

absl::Status CheckOutputDirectory(absl::string_view flag, const std::string& path) {
  if (path.empty()) return absl::OkStatus();
  auto fail = [&](absl::string_view what, const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat(flag, "=", path, ": ", what, ": ", why));
  };
  std::error_code ec;
  if (std::filesystem::exists(path, ec) && !std::filesystem::is_directory(path, ec)) {
    return fail("not a directory", "a file is there");
  }
  std::filesystem::create_directories(path, ec);
  if (ec) return fail("cannot create the directory", ec.message());
  if (!std::filesystem::is_directory(path, ec)) return fail("not a directory", "a file is there");
  const std::string probe = absl::StrCat(path, "/.pscluster-write-check-", getpid());
  const int fd = open(probe.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return fail("cannot write there", std::strerror(errno));
  const bool wrote = write(fd, "ok\n", 3) == 3;
  const int write_errno = errno;
  close(fd);
  unlink(probe.c_str());
  if (!wrote) return fail("cannot write there", std::strerror(write_errno));
  return absl::OkStatus();
}

}  // namespace job
}  // namespace psc
