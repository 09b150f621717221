// What was built: the CMake project version and, when the source tree was a
// git checkout at configure time, its commit (set by CMake; see
// common/base/CMakeLists.txt). Every binary's --version prints
// VersionString(); the result file records both.
#ifndef PSC_COMMON_BASE_BUILD_INFO_H_
#define PSC_COMMON_BASE_BUILD_INFO_H_

#include <string>

namespace psc {
namespace base {

// "0.1.0".
const char* Version();
// The full commit hash, or "" when the build had none (a tarball).
const char* GitCommit();
// "pscluster 0.1.0 (git 1a2b3c4d5e6f)", or without the parenthesis.
std::string VersionString();

}  // namespace base
}  // namespace psc

#endif  // PSC_COMMON_BASE_BUILD_INFO_H_
