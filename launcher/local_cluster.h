// Runs a planned cluster on this machine: every task a direct child started
// from the binaries beside the launcher, its output prefixed with its name,
// all of them stopped when the chief ends or on SIGINT/SIGTERM.
//
// Lifecycle: STARTING (ps, workers, then chief) -> RUNNING (until the chief
// exits or a signal arrives) -> STOPPING (chief, workers, ps: SIGTERM, then
// SIGKILL after the grace) -> DONE.
#ifndef PSC_LAUNCHER_LOCAL_CLUSTER_H_
#define PSC_LAUNCHER_LOCAL_CLUSTER_H_

#include <string>
#include <vector>

#include "absl/time/time.h"
#include "launcher/launch_plan.h"

namespace psc {
namespace launcher {

struct RunOptions {
  std::string bin_dir;                    // where ps_server, worker and chief are
  std::vector<std::string> daemon_flags;  // given to every task (e.g. --auth_token_file)
  std::vector<std::string> chief_flags;   // given to the chief only
  absl::Duration stop_grace = absl::Seconds(10);
};

// Runs `plan` to the end. Returns the chief's exit code (128 + signal if a
// signal ended it), or 128 + the signal that interrupted the launcher, or 1
// if a task could not be started. Call from the main thread with SIGINT and
// SIGTERM blocked (see common/shutdown.h).
int RunLocalCluster(const std::vector<PlannedTask>& plan, const RunOptions& options);

}  // namespace launcher
}  // namespace psc

#endif  // PSC_LAUNCHER_LOCAL_CLUSTER_H_
