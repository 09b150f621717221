#include "common/base/build_info.h"

#include "absl/strings/str_cat.h"

#ifndef PSC_VERSION
#error "PSC_VERSION must be defined by the build"
#endif
#ifndef PSC_GIT_COMMIT
#define PSC_GIT_COMMIT ""
#endif

namespace psc {
namespace base {

const char* Version() { return PSC_VERSION; }

const char* GitCommit() { return PSC_GIT_COMMIT; }

std::string VersionString() {
  const std::string commit = GitCommit();
  if (commit.empty()) return absl::StrCat("pscluster ", Version());
  return absl::StrCat("pscluster ", Version(), " (git ", commit.substr(0, 12), ")");
}

}  // namespace base
}  // namespace psc
