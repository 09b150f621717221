// Runs a planned cluster on this machine: every task a direct child started
// from the binaries beside the launcher, its output prefixed with its name,
// all of them stopped when the chief ends or on SIGINT/SIGTERM. With
// RunOptions::restart_failed, a ps or worker that fails while the chief runs
// is started again (same binary, flags and TF_CONFIG) after restart_delay,
// up to max_restarts times per task.
//
// Lifecycle: STARTING (ps, workers, then chief) -> RUNNING (until the chief
// exits or a signal arrives; failed tasks are restarted here) -> STOPPING
// (chief, workers, ps: SIGTERM, then SIGKILL after the grace; pending
// restarts are dropped) -> DONE.
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
  // Restart a ps or worker (never the chief) that exits non-zero or is
  // killed by a signal while the chief runs. A task that exits 0 is left down.
  bool restart_failed = false;
  int max_restarts = 3;  // per task; >= 0; after that it is given up and left down
  absl::Duration restart_delay = absl::Seconds(1);  // between the exit and the restart
};

// Runs `plan` to the end. Returns the chief's exit code (128 + signal if a
// signal ended it), or 128 + the signal that interrupted the launcher, or 1
// if a task could not be started. (A failed restart only leaves that task
// down.) Call from the main thread with SIGINT and SIGTERM blocked (see
// common/shutdown.h); the tasks, restarts included, are spawned from it.
int RunLocalCluster(const std::vector<PlannedTask>& plan, const RunOptions& options);

}  // namespace launcher
}  // namespace psc

#endif  // PSC_LAUNCHER_LOCAL_CLUSTER_H_
