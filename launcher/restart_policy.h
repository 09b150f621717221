// When the local launcher restarts a task that ended, and the log line that
// says so. Free of processes and time, so the decision is unit-tested.
#ifndef PSC_LAUNCHER_RESTART_POLICY_H_
#define PSC_LAUNCHER_RESTART_POLICY_H_

#include <string>

#include "common/cluster/cluster_config.h"
#include "launcher/subprocess.h"

namespace psc {
namespace launcher {

struct RestartPolicy {
  bool restart_failed = false;  // --restart_failed
  int max_restarts = 3;         // per task; >= 0
};

enum class ExitAction {
  kLeaveDown,  // not a failure, the chief, or restarts are off
  kRestart,    // a failed ps, worker or evaluator with restarts left
  kGiveUp,     // a failed ps, worker or evaluator whose restarts are used up
};

// What to do about a task of `type` that ended with `exit` while the chief
// still runs, after `restarts_done` restarts of that task. A failure is a
// non-zero exit or death by a signal; a task that exits 0 (e.g. after a
// Shutdown RPC, or an evaluator done with the final checkpoint) ended on
// purpose and is left down. The chief is never restarted: its exit ends
// the run.
ExitAction DecideOnExit(cluster::TaskType type, const ExitInfo& exit, const RestartPolicy& policy,
                        int restarts_done);

// The launcher's line (without "[launcher] " and newline) for that exit:
//   kLeaveDown: "worker:1 exited: exit 0"
//   kRestart:   "worker:1 exited: killed by signal 9; restarting (1/3)"
//               (the restart about to happen, of max_restarts)
//   kGiveUp:    "worker:1 exited: exit 1; giving up after 3 restart(s)"
std::string DescribeExit(const std::string& task_name, const ExitInfo& exit, ExitAction action,
                         const RestartPolicy& policy, int restarts_done);

}  // namespace launcher
}  // namespace psc

#endif  // PSC_LAUNCHER_RESTART_POLICY_H_
