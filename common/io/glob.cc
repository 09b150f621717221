#include "common/io/glob.h"

#include <glob.h>
#include <sys/stat.h>

#include <algorithm>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace psc {
namespace io {

absl::StatusOr<std::vector<std::string>> ExpandGlob(absl::string_view pattern) {
  if (const size_t scheme = pattern.find("://"); scheme != absl::string_view::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat(pattern, ": ", pattern.substr(0, scheme + 3),
                     " is not read; files must be on a local or mounted file system that every "
                     "worker sees at the same path"));
  }
  const std::string p(pattern);
  glob_t g = {};
  const int r = glob(p.c_str(), GLOB_ERR, nullptr, &g);
  std::vector<std::string> files;
  if (r == 0) {
    for (size_t i = 0; i < g.gl_pathc; ++i) {
      struct stat st;
      if (stat(g.gl_pathv[i], &st) == 0 && S_ISREG(st.st_mode)) files.emplace_back(g.gl_pathv[i]);
    }
  }
  globfree(&g);
  if (r != 0 && r != GLOB_NOMATCH) {
    return absl::InternalError(absl::StrCat(pattern, ": cannot list the files it names"));
  }
  if (files.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(pattern, " matches no file"));
  }
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace io
}  // namespace psc
