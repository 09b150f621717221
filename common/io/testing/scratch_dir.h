// Tests only: a directory of its own under the test's temporary directory,
// removed when the object goes, and files written into it whole.
#ifndef PSC_COMMON_IO_TESTING_SCRATCH_DIR_H_
#define PSC_COMMON_IO_TESTING_SCRATCH_DIR_H_

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace psc::io::testing {

class ScratchDir {
 public:
  // <TempDir>/<name>_<pid>, made afresh.
  explicit ScratchDir(const std::string& name)
      : path_(absl::StrCat(::testing::TempDir(), "/", name, "_", getpid())) {
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  const std::string& path() const { return path_; }
  // Writes `bytes` as the file `name` in the directory (replacing it); its path.
  std::string Write(const std::string& name, const std::string& bytes) const {
    const std::string file = absl::StrCat(path_, "/", name);
    std::ofstream(file, std::ios::binary | std::ios::trunc) << bytes;
    return file;
  }

 private:
  const std::string path_;
};

}  // namespace psc::io::testing

#endif  // PSC_COMMON_IO_TESTING_SCRATCH_DIR_H_
