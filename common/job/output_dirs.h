// The chief's output directories (--checkpoint_dir, --logdir) are checked
// when it starts, not at the first checkpoint or event (by default the end
// of the run, which would then be lost).
#ifndef PSC_COMMON_JOB_OUTPUT_DIRS_H_
#define PSC_COMMON_JOB_OUTPUT_DIRS_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace psc {
namespace job {

// Creates `path` and its parents as needed, then creates, writes and removes
// a probe file in it. OK for an empty path (the flag is not set).
// INVALID_ARGUMENT naming `flag` and the OS's reason otherwise (e.g.
// "--checkpoint_dir=/ro/x: cannot write there: Permission denied").
absl::Status CheckOutputDirectory(absl::string_view flag, const std::string& path);

}  // namespace job
}  // namespace psc

#endif  // PSC_COMMON_JOB_OUTPUT_DIRS_H_
