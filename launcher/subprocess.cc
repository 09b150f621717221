#include "launcher/subprocess.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

extern char** environ;

namespace psc {
namespace launcher {
namespace {

ExitInfo FromWaitStatus(int status) {
  ExitInfo info;
  if (WIFEXITED(status)) {
    info.exited = true;
    info.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    info.term_signal = WTERMSIG(status);
  }
  return info;
}

// Redirects fd `target` per the options; async-signal-safe (runs in the child).
bool RedirectInChild(int fd, const std::string& path, int target) {
  if (fd >= 0) return dup2(fd, target) >= 0;
  if (path.empty()) return true;
  if (path == "=stdout") return dup2(STDOUT_FILENO, target) >= 0;
  int f = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (f < 0) return false;
  return dup2(f, target) >= 0;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Subprocess>> Subprocess::SpawnWithFork(
    const SubprocessOptions& options, std::vector<char*>& argv, std::vector<char*>& envp) {
  // The child reports a failed exec through a close-on-exec pipe.
  int report[2];
  if (pipe2(report, O_CLOEXEC) != 0) {
    return absl::InternalError(absl::StrCat("pipe2: ", std::strerror(errno)));
  }
  const pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) {
    close(report[0]);
    close(report[1]);
    return absl::InternalError(absl::StrCat("fork: ", std::strerror(errno)));
  }
  if (pid == 0) {
    // Only async-signal-safe calls from here to execve.
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent) _exit(127);
    sigset_t empty;
    sigemptyset(&empty);
    sigprocmask(SIG_SETMASK, &empty, nullptr);
    for (int sig = 1; sig < NSIG; ++sig) {
      if (sig != SIGKILL && sig != SIGSTOP) signal(sig, SIG_DFL);
    }
    int err = 0;
    if (!RedirectInChild(options.stdout_fd, options.stdout_path, STDOUT_FILENO) ||
        !RedirectInChild(options.stderr_fd, options.stderr_path, STDERR_FILENO)) {
      err = errno;
    } else {
      execve(argv[0], argv.data(), envp.data());
      err = errno;
    }
    ssize_t ignored = write(report[1], &err, sizeof(err));
    (void)ignored;
    _exit(127);
  }
  close(report[1]);
  int child_errno = 0;
  ssize_t n;
  do {
    n = read(report[0], &child_errno, sizeof(child_errno));
  } while (n < 0 && errno == EINTR);
  close(report[0]);
  if (n == sizeof(child_errno)) {
    int status = 0;
    waitpid(pid, &status, 0);
    return absl::InternalError(
        absl::StrCat("cannot start ", options.argv[0], ": ", std::strerror(child_errno)));
  }
  return std::unique_ptr<Subprocess>(new Subprocess(pid));
}

std::string ExitInfo::ToString() const {
  return exited ? absl::StrCat("exit ", exit_code) : absl::StrCat("killed by signal ", term_signal);
}

absl::StatusOr<std::unique_ptr<Subprocess>> Subprocess::Spawn(const SubprocessOptions& options) {
  if (options.argv.empty()) return absl::InvalidArgumentError("Subprocess: empty argv");

  // Environment: inherited, minus unset_env, with env on top.
  std::vector<std::string> env_storage;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string entry(*e);
    std::string key = entry.substr(0, entry.find('='));
    bool drop = options.env.count(key) > 0;
    for (const std::string& u : options.unset_env) drop = drop || u == key;
    if (!drop) env_storage.push_back(std::move(entry));
  }
  for (const auto& [key, value] : options.env) env_storage.push_back(key + "=" + value);
  std::vector<char*> envp;
  for (std::string& e : env_storage) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_storage = options.argv;
  std::vector<char*> argv;
  for (std::string& a : argv_storage) argv.push_back(a.data());
  argv.push_back(nullptr);

  if (options.die_with_parent) return SpawnWithFork(options, argv, envp);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (options.stdout_fd >= 0) {
    posix_spawn_file_actions_adddup2(&actions, options.stdout_fd, STDOUT_FILENO);
  } else if (!options.stdout_path.empty()) {
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, options.stdout_path.c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0644);
  }
  if (options.stderr_fd >= 0) {
    posix_spawn_file_actions_adddup2(&actions, options.stderr_fd, STDERR_FILENO);
  } else if (options.stderr_path == "=stdout") {
    posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  } else if (!options.stderr_path.empty()) {
    posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, options.stderr_path.c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0644);
  }
  // The child starts with default signal dispositions and an empty mask,
  // whatever this process blocked (daemons block SIGTERM for sigwait).
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t empty, all;
  sigemptyset(&empty);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attr, &empty);
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);

  pid_t pid = 0;
  int rc = posix_spawn(&pid, argv[0], &actions, &attr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    return absl::InternalError(
        absl::StrCat("cannot start ", options.argv[0], ": ", std::strerror(rc)));
  }
  return std::unique_ptr<Subprocess>(new Subprocess(pid));
}

Subprocess::~Subprocess() {
  if (!exit_.has_value()) {
    kill(pid_, SIGKILL);
    int status = 0;
    while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
  }
}

void Subprocess::Signal(int sig) {
  if (!exit_.has_value()) kill(pid_, sig);
}

std::optional<ExitInfo> Subprocess::Poll() {
  if (exit_.has_value()) return exit_;
  int status = 0;
  pid_t r = waitpid(pid_, &status, WNOHANG);
  if (r == pid_) exit_ = FromWaitStatus(status);
  return exit_;
}

absl::StatusOr<ExitInfo> Subprocess::Wait(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  absl::Duration nap = absl::Milliseconds(1);
  for (;;) {
    if (auto info = Poll()) return *info;
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat("process ", pid_, " still running after ", absl::FormatDuration(timeout)));
    }
    absl::SleepFor(std::min(nap, deadline - absl::Now()));
    nap = std::min(nap * 2, absl::Milliseconds(20));
  }
}

ExitInfo Subprocess::Stop(absl::Duration grace) {
  if (auto info = Poll()) return *info;
  Signal(SIGTERM);
  auto info = Wait(grace);
  if (info.ok()) return *info;
  Signal(SIGKILL);
  auto killed = Wait(absl::Seconds(30));
  return killed.ok() ? *killed : ExitInfo{};
}

}  // namespace launcher
}  // namespace psc
