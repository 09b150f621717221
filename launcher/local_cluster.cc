#include "launcher/local_cluster.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <functional>
#include <memory>
#include <optional>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "launcher/flag_args.h"
#include "launcher/restart_policy.h"
#include "launcher/task_process.h"

namespace psc {
namespace launcher {
namespace {

// Writes whole lines to stdout, one at a time. Thread-safe.
class Output {
 public:
  // `line` ends with a newline, or is an in-place redraw ("\r...", none):
  // another line after a redraw starts on a line of its own.
  void Emit(const std::string& line) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    if (line.empty()) return;
    if (open_redraw_ && line[0] != '\r') Write("\n");
    open_redraw_ = line.back() != '\n';
    Write(line);
  }

  // The reader of our stdout went away (`| head`, a closed `| tee`): the
  // cluster is stopped, as on Ctrl-C, instead of running on unseen.
  bool closed() const ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    return closed_;
  }

 private:
  void Write(const std::string& line) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const char* p = line.data();
    size_t left = line.size();
    while (left > 0) {
      ssize_t n = write(STDOUT_FILENO, p, left);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno == EPIPE) closed_ = true;  // SIGPIPE is ignored (main)
      if (n <= 0) return;
      p += n;
      left -= static_cast<size_t>(n);
    }
  }

  mutable absl::Mutex mu_;  // serializes writes, so lines never interleave
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  bool open_redraw_ ABSL_GUARDED_BY(mu_) = false;  // the last write was a redraw
};

using Say = std::function<void(const std::string&)>;

// A task and what the RUNNING loop knows about it. Used by the main thread only.
struct TaskState {
  std::unique_ptr<TaskProcess> process;
  bool reported_exit = false;            // the current incarnation's end was logged
  int restarts = 0;                      // restarts scheduled so far
  std::optional<absl::Time> restart_at;  // a pending restart
};

int ExitCodeOf(const ExitInfo& info) {
  return info.exited ? info.exit_code : 128 + info.term_signal;
}

// STARTING: every task in plan order. Returns false (having logged why) at
// the first task that cannot start; `tasks` then holds those that did.
bool StartAll(const std::vector<PlannedTask>& plan, const RunOptions& options,
              const TaskProcess::LineSink& sink, const Say& say, std::vector<TaskState>& tasks) {
  const bool with_evaluator = std::any_of(plan.begin(), plan.end(), [](const PlannedTask& p) {
    return p.type == cluster::TaskType::kEvaluator;
  });
  for (const PlannedTask& p : plan) {
    auto process =
        std::make_unique<TaskProcess>(p, TaskArgv(p, options, with_evaluator), sink,
                                      options.terminal && p.type == cluster::TaskType::kChief);
    if (absl::Status s = process->Start(); !s.ok()) {
      say(absl::StrCat("cannot start ", p.Name(), ": ", s.message()));
      return false;
    }
    say(absl::StrCat("started ", p.Name(), " (pid ", process->pid(), ") on ", p.address));
    TaskState& t = tasks.emplace_back();
    t.process = std::move(process);
  }
  return true;
}

// Logs how a ps or worker ended and schedules its restart if the policy says so.
void OnTaskExit(TaskState& t, const ExitInfo& info, const RestartPolicy& policy,
                const RunOptions& options, const Say& say) {
  t.reported_exit = true;
  const PlannedTask& p = t.process->task();
  const ExitAction action = DecideOnExit(p.type, info, policy, t.restarts);
  say(DescribeExit(p.Name(), info, action, policy, t.restarts));
  if (action == ExitAction::kRestart) {
    ++t.restarts;
    t.restart_at = absl::Now() + options.restart_delay;
  }
}

// Starts the next incarnation of a task whose restart is due.
void Restart(TaskState& t, const Say& say) {
  t.restart_at.reset();
  const std::string name = t.process->task().Name();
  if (absl::Status s = t.process->Start(); !s.ok()) {
    say(absl::StrCat("cannot restart ", name, ": ", s.message(), "; leaving it down"));
    return;
  }
  t.reported_exit = false;
  say(absl::StrCat("restarted ", name, " (pid ", t.process->pid(), ")"));
}

// Whether a signal arrived within one poll slice; if so logs it and returns
// 128 + the signal, else 0.
int TakeSignal(const Say& say) {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  timespec slice{0, 50 * 1000 * 1000};
  const int sig = sigtimedwait(&signals, nullptr, &slice);
  if (sig <= 0) return 0;
  say(absl::StrCat("got ", sig == SIGINT ? "SIGINT" : "SIGTERM", "; stopping the cluster"));
  return 128 + sig;
}

// RUNNING: watches the chief, the other tasks and the signals; restarts
// failed tasks when due. Never blocks for more than a poll slice. Returns the
// launcher's exit code.
int Watch(std::vector<TaskState>& tasks, const RunOptions& options, const Say& say,
          const Output& out) {
  const RestartPolicy policy{options.restart_failed, options.max_restarts};
  for (;;) {
    if (out.closed()) return 128 + SIGPIPE;
    // The chief first: a task that ends together with it is not restarted.
    for (TaskState& t : tasks) {
      if (t.process->task().type != cluster::TaskType::kChief || t.reported_exit) continue;
      if (auto info = t.process->Poll()) {
        t.reported_exit = true;
        say(absl::StrCat(t.process->task().Name(), " exited: ", info->ToString()));
        return ExitCodeOf(*info);
      }
    }
    for (TaskState& t : tasks) {
      if (t.process->task().type == cluster::TaskType::kChief) continue;
      if (t.restart_at.has_value()) {
        if (absl::Now() >= *t.restart_at) Restart(t, say);
        continue;
      }
      if (t.reported_exit) continue;
      if (auto info = t.process->Poll()) OnTaskExit(t, *info, policy, options, say);
    }
    if (const int code = TakeSignal(say); code != 0) return code;
  }
}

// FINISHING: after the chief exited 0, waits for a running evaluator to exit
// by itself, up to evaluator_grace. Returns 0, or 128 + a signal that
// arrived meanwhile. A pending restart of the evaluator is left to STOPPING
// to drop.
int AwaitEvaluator(std::vector<TaskState>& tasks, const RunOptions& options, const Say& say) {
  for (TaskState& t : tasks) {
    if (t.process->task().type != cluster::TaskType::kEvaluator) continue;
    if (t.reported_exit || t.restart_at.has_value()) return 0;
    const std::string name = t.process->task().Name();
    say(absl::StrCat("waiting up to ", absl::FormatDuration(options.evaluator_grace), " for ", name,
                     " to finish"));
    const absl::Time deadline = absl::Now() + options.evaluator_grace;
    for (;;) {
      if (auto info = t.process->Poll()) {
        t.reported_exit = true;
        say(absl::StrCat(name, " exited: ", info->ToString()));
        return 0;
      }
      if (absl::Now() >= deadline) {
        say(absl::StrCat(name, " did not finish within ",
                         absl::FormatDuration(options.evaluator_grace), "; stopping it"));
        return 0;
      }
      if (const int code = TakeSignal(say); code != 0) return code;
    }
  }
  return 0;
}

// STOPPING: the current incarnation of every task, chief first, then the
// evaluator, workers, then servers; then every reader, old incarnations'
// included.
void StopAll(std::vector<TaskState>& tasks, const RunOptions& options, const Say& say) {
  for (auto it = tasks.rbegin(); it != tasks.rend(); ++it) {
    if (!it->process->Poll().has_value()) it->process->Signal(SIGTERM);
  }
  for (auto it = tasks.rbegin(); it != tasks.rend(); ++it) {
    if (it->restart_at.has_value()) {
      say(absl::StrCat("dropping the pending restart of ", it->process->task().Name()));
      it->restart_at.reset();
    }
    ExitInfo info = it->process->Stop(options.stop_grace);
    if (!it->reported_exit) {
      say(absl::StrCat(it->process->task().Name(), " stopped: ", info.ToString()));
    }
    it->reported_exit = true;
  }
  for (TaskState& t : tasks) t.process->JoinReaders();
}

}  // namespace

std::vector<std::string> TaskArgv(const PlannedTask& task, const RunOptions& options,
                                  bool with_evaluator) {
  std::vector<std::string> argv = {absl::StrCat(options.bin_dir, "/", task.binary)};
  argv.insert(argv.end(), options.daemon_flags.begin(), options.daemon_flags.end());
  if (task.metrics_port > 0) argv.push_back(absl::StrCat("--metrics_port=", task.metrics_port));
  if (task.type == cluster::TaskType::kWorker) {
    argv.insert(argv.end(), options.worker_flags.begin(), options.worker_flags.end());
    if (auto own = options.flags_of_worker.find(task.index); own != options.flags_of_worker.end()) {
      argv.insert(argv.end(), own->second.begin(), own->second.end());
    }
  } else if (task.type == cluster::TaskType::kChief) {
    if (with_evaluator) argv.push_back(absl::StrCat("--undefok=", kEvaluatorOnlyFlags));
    argv.insert(argv.end(), options.chief_flags.begin(), options.chief_flags.end());
  } else if (task.type == cluster::TaskType::kEvaluator) {
    argv.push_back(absl::StrCat("--undefok=", kChiefOnlyFlags));
    const std::vector<std::string> flags = WithoutFlag(options.chief_flags, "tf_config");
    argv.insert(argv.end(), flags.begin(), flags.end());
  }
  return argv;
}

int CheckJob(const std::vector<PlannedTask>& plan, const RunOptions& options) {
  const auto chief = std::find_if(plan.begin(), plan.end(), [](const PlannedTask& p) {
    return p.type == cluster::TaskType::kChief;
  });
  if (chief == plan.end()) return 0;  // no chief: no job
  const bool with_evaluator = std::any_of(plan.begin(), plan.end(), [](const PlannedTask& p) {
    return p.type == cluster::TaskType::kEvaluator;
  });
  SubprocessOptions check;
  check.argv = TaskArgv(*chief, options, with_evaluator);
  check.argv.push_back("--check_job");
  check.unset_env = {"TF_CONFIG"};
  auto child = Subprocess::Spawn(check);
  if (!child.ok()) {
    std::fprintf(stderr, "pscluster: cannot check the job: %s\n",
                 std::string(child.status().message()).c_str());
    return 1;
  }
  absl::StatusOr<ExitInfo> exit = (*child)->Wait(absl::Hours(1));
  if (!exit.ok() || !exit->exited) {
    std::fprintf(
        stderr, "pscluster: the job check did not finish: %s\n",
        exit.ok() ? exit->ToString().c_str() : std::string(exit.status().message()).c_str());
    return 1;
  }
  return exit->exit_code;
}

int RunLocalCluster(const std::vector<PlannedTask>& plan, const RunOptions& options) {
  Output out;
  const TaskProcess::LineSink sink = [&out](const std::string& line) { out.Emit(line); };
  const Say say = [&out](const std::string& s) { out.Emit(absl::StrCat("[launcher] ", s, "\n")); };
  std::vector<TaskState> tasks;
  tasks.reserve(plan.size());
  int exit_code = StartAll(plan, options, sink, say, tasks) ? Watch(tasks, options, say, out) : 1;
  if (exit_code == 0) exit_code = AwaitEvaluator(tasks, options, say);
  StopAll(tasks, options, say);
  return exit_code;
}

}  // namespace launcher
}  // namespace psc
