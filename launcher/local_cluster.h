// Runs a planned cluster on this machine: every task a direct child started
// from the binaries beside the launcher, its output prefixed with its name,
// all of them stopped when the chief ends or on SIGINT/SIGTERM. With
// RunOptions::restart_failed, a ps, worker or evaluator that fails while the
// chief runs is started again (same binary, flags and TF_CONFIG) after
// restart_delay, up to max_restarts times per task.
//
// The evaluator, when planned, evaluates checkpoints on the side: when the
// chief exits 0 it may still be evaluating the final checkpoint, so the
// launcher lets it exit by itself for up to evaluator_grace before stopping
// it. When the chief fails, or on a signal, it is stopped with the others.
//
// Lifecycle: STARTING (ps, workers, evaluator, then chief) -> RUNNING (until
// the chief exits or a signal arrives; failed tasks are restarted here) ->
// FINISHING (only after the chief exited 0 with an evaluator running: wait
// for it, up to evaluator_grace or a signal; no restarts) -> STOPPING (chief,
// evaluator, workers, ps: SIGTERM, then SIGKILL after the grace; pending
// restarts are dropped) -> DONE.
#ifndef PSC_LAUNCHER_LOCAL_CLUSTER_H_
#define PSC_LAUNCHER_LOCAL_CLUSTER_H_

#include <map>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "launcher/launch_plan.h"

namespace psc {
namespace launcher {

struct RunOptions {
  std::string bin_dir;                    // where ps_server, worker, evaluator and chief are
  std::vector<std::string> daemon_flags;  // given to every task (e.g. --auth_token_file)
  std::vector<std::string> chief_flags;   // given to the chief and the evaluator (see TaskArgv)
  std::vector<std::string> worker_flags;  // given to every worker (e.g. --virtual_devices)
  // Given to one worker, by index, after worker_flags (--straggler_factor).
  std::map<int, std::vector<std::string>> flags_of_worker;
  absl::Duration stop_grace = absl::Seconds(10);
  // Restart a ps or worker (never the chief) that exits non-zero or is
  // killed by a signal while the chief runs. A task that exits 0 is left down.
  bool restart_failed = false;
  int max_restarts = 3;  // per task; >= 0; after that it is given up and left down
  absl::Duration restart_delay = absl::Seconds(1);  // between the exit and the restart
  // After the chief exited 0, how long the evaluator may take to finish.
  absl::Duration evaluator_grace = absl::Seconds(120);
  // The launcher's stdout is a terminal: the chief draws Keras's in-place
  // bar (PSC_PROGRESS=terminal) and its redraws are passed on in place.
  bool terminal = false;
};

// The flags of the chief that the evaluator does not define; it is started
// with --undefok naming them, so it takes the chief's command line as is.
inline constexpr char kChiefOnlyFlags[] =
    "check_cluster,check_job,startup_timeout,checkpoint_every_steps,unit_steps,eval_threads,"
    "eval_every_steps,evaluator_wait";
// The evaluator's flags that the chief does not define; with an evaluator
// in the plan the chief gets --undefok naming them, so that they can be
// given with the chief's flags.
inline constexpr char kEvaluatorOnlyFlags[] = "eval_out,poll_interval";

// The command line of `task`: <bin_dir>/<binary>, then daemon_flags, then
//  - a worker: worker_flags;
//  - the chief: chief_flags, and --undefok=<kEvaluatorOnlyFlags> first when
//    `with_evaluator`;
//  - the evaluator: --undefok=<kChiefOnlyFlags>, then chief_flags without
//    --tf_config (the chief's own; the evaluator gets its TF_CONFIG from the
//    launcher like every task).
std::vector<std::string> TaskArgv(const PlannedTask& task, const RunOptions& options,
                                  bool with_evaluator);

// Runs the chief's command line (TaskArgv) with --check_job and no
// TF_CONFIG, to completion: the job's flags, model and data are checked by
// the chief's own code before any task starts. Returns its exit code (0: the
// job is good; 2: a bad job, its message on stderr), 1 when it cannot run or
// is killed.
int CheckJob(const std::vector<PlannedTask>& plan, const RunOptions& options);

// Runs `plan` to the end. Returns the chief's exit code (128 + signal if a
// signal ended it), or 128 + the signal that interrupted the launcher (also
// while it waits for the evaluator), or 1 if a task could not be started.
// (A failed restart only leaves that task down; how the evaluator ends does
// not change the exit code.) Call from the main thread with SIGINT and SIGTERM blocked (see
// common/base/shutdown.h); the tasks, restarts included, are spawned from it.
int RunLocalCluster(const std::vector<PlannedTask>& plan, const RunOptions& options);

}  // namespace launcher
}  // namespace psc

#endif  // PSC_LAUNCHER_LOCAL_CLUSTER_H_
