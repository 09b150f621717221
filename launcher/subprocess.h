// Child processes: spawn with extra environment and redirected output, signal,
// and wait with a deadline. Used by the local launcher and by the
// multi-process tests; never leaves a child behind (the destructor kills it).
#ifndef PSC_LAUNCHER_SUBPROCESS_H_
#define PSC_LAUNCHER_SUBPROCESS_H_

#include <sys/types.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace psc {
namespace launcher {

struct SubprocessOptions {
  std::vector<std::string> argv;           // argv[0] is the program path
  std::map<std::string, std::string> env;  // set on top of this process's environment
  std::vector<std::string> unset_env;      // removed from the inherited environment
  std::string stdout_path;                 // "" inherits; else truncated and written
  std::string stderr_path;                 // "" inherits; "=stdout" joins stdout
  int stdout_fd = -1;                      // >= 0: dup'ed to the child's stdout (e.g. a pipe)
  int stderr_fd = -1;                      // >= 0: dup'ed to the child's stderr
  // The child gets SIGTERM when the thread that spawned it exits (Linux
  // PR_SET_PDEATHSIG), so a launcher killed with -9 leaves no orphans. Spawn
  // from a thread that lives as long as the child should (main).
  bool die_with_parent = false;
};

// How a child ended.
struct ExitInfo {
  bool exited = false;  // true: exit_code is valid; false: killed by term_signal
  int exit_code = 0;
  int term_signal = 0;
  std::string ToString() const;  // "exit 0", "killed by signal 9"
};

// Thread-compatible.
class Subprocess {
 public:
  // Starts the child. INVALID_ARGUMENT for an empty argv; INTERNAL when the
  // program cannot be started (posix_spawn's reason).
  static absl::StatusOr<std::unique_ptr<Subprocess>> Spawn(const SubprocessOptions& options);

  // Kills the child (SIGKILL) if it is still running, and reaps it.
  ~Subprocess();

  pid_t pid() const { return pid_; }

  // Sends `sig`; no-op once the child was reaped.
  void Signal(int sig);

  // Waits up to `timeout` for the child to end. DEADLINE_EXCEEDED if it is
  // still running then (it keeps running).
  absl::StatusOr<ExitInfo> Wait(absl::Duration timeout);

  // Non-blocking: the exit info if the child has ended.
  std::optional<ExitInfo> Poll();

  // SIGTERM, wait up to `grace`, then SIGKILL; returns how it ended.
  ExitInfo Stop(absl::Duration grace);

 private:
  explicit Subprocess(pid_t pid) : pid_(pid) {}
  static absl::StatusOr<std::unique_ptr<Subprocess>> SpawnWithFork(const SubprocessOptions& options,
                                                                   std::vector<char*>& argv,
                                                                   std::vector<char*>& envp);

  pid_t pid_;
  std::optional<ExitInfo> exit_;
};

}  // namespace launcher
}  // namespace psc

#endif  // PSC_LAUNCHER_SUBPROCESS_H_
