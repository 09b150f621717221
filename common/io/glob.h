// File name patterns (glob(7): *, ?, [...]) as a data job's --data names its
// files: expanded on this machine, in name order. Thread-safe.
#ifndef PSC_COMMON_IO_GLOB_H_
#define PSC_COMMON_IO_GLOB_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace psc {
namespace io {

// The regular files `pattern` matches, sorted. INVALID_ARGUMENT naming the
// pattern when it matches none, and naming the scheme for a URL
// ("gs://...", "s3://...", "hdfs://...": only local or mounted paths are
// read); INTERNAL naming it when the file system fails.
absl::StatusOr<std::vector<std::string>> ExpandGlob(absl::string_view pattern);

}  // namespace io
}  // namespace psc

#endif  // PSC_COMMON_IO_GLOB_H_
