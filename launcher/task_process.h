// One task of a local cluster across its incarnations. Each Start() spawns
// the task's binary with its TF_CONFIG and flags, its stdout and stderr on a
// fresh pipe drained by a reader thread that prefixes every line with
// "[<task name>] ", so a restarted task logs under the same name.
//
// Lifecycle:
//   NEW --Start()--> RUNNING --(exits, or Signal()/Stop())--> ENDED
//   ENDED --Start()--> RUNNING (a new incarnation: new pid, pipe and reader)
// The destructor kills a running incarnation and joins every reader.
//
// Thread-compatible: one thread calls every method, and it must be a thread
// that lives as long as the children (the launcher's main thread): children
// get SIGTERM when the thread that spawned them exits (see
// SubprocessOptions::die_with_parent). The reader threads touch only their
// own pipe and prefixer, and the sink, which must be thread-safe.
#ifndef PSC_LAUNCHER_TASK_PROCESS_H_
#define PSC_LAUNCHER_TASK_PROCESS_H_

#include <sys/types.h>

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "launcher/launch_plan.h"
#include "launcher/subprocess.h"

namespace psc {
namespace launcher {

class TaskProcess {
 public:
  // Receives whole, prefixed lines ("[worker:0] ...\n") from reader threads;
  // must be thread-safe.
  using LineSink = std::function<void(const std::string& line)>;

  // `task` must outlive this object. `argv[0]` is the program path; the rest
  // are its flags. Starts nothing. `in_place`: the task draws an in-place
  // progress bar (it gets PSC_PROGRESS=terminal, and its '\r' redraws are
  // passed on; see line_prefixer.h).
  TaskProcess(const PlannedTask& task, std::vector<std::string> argv, LineSink sink,
              bool in_place = false);
  ~TaskProcess();

  TaskProcess(const TaskProcess&) = delete;
  TaskProcess& operator=(const TaskProcess&) = delete;

  // Spawns a new incarnation. FAILED_PRECONDITION while the current one still
  // runs; INTERNAL when the pipe or the process cannot be created (nothing
  // was started then, and a previous incarnation's exit stays readable).
  absl::Status Start();

  const PlannedTask& task() const { return task_; }
  // The current (or last) incarnation's pid; 0 before the first Start().
  pid_t pid() const;
  // Incarnations started so far.
  int starts() const { return starts_; }

  // Non-blocking: how the current incarnation ended, or nullopt while it
  // runs (or before the first Start()).
  std::optional<ExitInfo> Poll();
  // Sends `sig` to the current incarnation; no-op once it was reaped.
  void Signal(int sig);
  // SIGTERM, then SIGKILL after `grace`; blocks until the current
  // incarnation ended and returns how (at once if it already had). Before
  // the first Start(), returns a default ExitInfo.
  ExitInfo Stop(absl::Duration grace);

  // Blocks until every incarnation's output was read to its end (the pipe's
  // last writer closed it) and its reader joined. Call after the processes
  // ended; idempotent.
  void JoinReaders();

 private:
  struct Reader {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;  // set by the thread as it ends
  };
  // Joins readers that already finished, so a task that crashes again and
  // again does not pile up threads.
  void ReapFinishedReaders();

  // Constant after construction.
  const PlannedTask& task_;
  const std::vector<std::string> argv_;
  const LineSink sink_;
  const bool in_place_;

  std::unique_ptr<Subprocess> process_;  // the current incarnation
  int starts_ = 0;
  std::vector<Reader> readers_;  // every incarnation's reader not yet joined
};

}  // namespace launcher
}  // namespace psc

#endif  // PSC_LAUNCHER_TASK_PROCESS_H_
