#include "launcher/local_cluster.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/subprocess.h"
#include "launcher/line_prefixer.h"

namespace psc {
namespace launcher {
namespace {

// Writes whole lines to stdout, one at a time. Thread-safe.
class Output {
 public:
  void Emit(const std::string& line) {
    absl::MutexLock lock(&mu_);
    const char* p = line.data();
    size_t left = line.size();
    while (left > 0) {
      ssize_t n = write(STDOUT_FILENO, p, left);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return;
      p += n;
      left -= static_cast<size_t>(n);
    }
  }

 private:
  absl::Mutex mu_;
};

struct RunningTask {
  const PlannedTask* plan;
  std::unique_ptr<Subprocess> process;
  std::thread reader;
  bool reported_exit = false;
};

int ExitCodeOf(const ExitInfo& info) {
  return info.exited ? info.exit_code : 128 + info.term_signal;
}

}  // namespace

int RunLocalCluster(const std::vector<PlannedTask>& plan, const RunOptions& options) {
  Output out;
  auto say = [&](const std::string& s) { out.Emit(absl::StrCat("[launcher] ", s, "\n")); };
  std::vector<RunningTask> tasks;
  tasks.reserve(plan.size());
  int exit_code = -1;

  for (const PlannedTask& p : plan) {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) {
      say(absl::StrCat("cannot create a pipe for ", p.Name(), ": ", std::strerror(errno)));
      exit_code = 1;
      break;
    }
    SubprocessOptions o;
    o.argv = {absl::StrCat(options.bin_dir, "/", p.binary)};
    o.argv.insert(o.argv.end(), options.daemon_flags.begin(), options.daemon_flags.end());
    if (p.type == TaskType::kChief) {
      o.argv.insert(o.argv.end(), options.chief_flags.begin(), options.chief_flags.end());
    }
    o.env = {{"TF_CONFIG", p.tf_config}};
    o.stdout_fd = fds[1];
    o.stderr_fd = fds[1];
    o.die_with_parent = true;
    auto process = Subprocess::Spawn(o);
    close(fds[1]);
    if (!process.ok()) {
      close(fds[0]);
      say(absl::StrCat("cannot start ", p.Name(), ": ", process.status().message()));
      exit_code = 1;
      break;
    }
    say(absl::StrCat("started ", p.Name(), " (pid ", (*process)->pid(), ") on ", p.address));
    RunningTask t{&p, *std::move(process)};
    const int read_fd = fds[0];
    t.reader = std::thread([&out, read_fd, name = p.Name()] {
      LinePrefixer prefixer(absl::StrCat("[", name, "] "),
                            [&out](const std::string& line) { out.Emit(line); });
      char buf[4096];
      for (;;) {
        ssize_t n = read(read_fd, buf, sizeof(buf));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        prefixer.Feed(absl::string_view(buf, static_cast<size_t>(n)));
      }
      prefixer.Flush();
      close(read_fd);
    });
    tasks.push_back(std::move(t));
  }

  // RUNNING: watch the chief, the other tasks and the signals.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  while (exit_code < 0) {
    for (RunningTask& t : tasks) {
      auto info = t.process->Poll();
      if (!info.has_value() || t.reported_exit) continue;
      t.reported_exit = true;
      say(absl::StrCat(t.plan->Name(), " exited: ", info->ToString()));
      if (t.plan->type == TaskType::kChief) exit_code = ExitCodeOf(*info);
    }
    if (exit_code >= 0) break;
    timespec slice{0, 50 * 1000 * 1000};
    int sig = sigtimedwait(&signals, nullptr, &slice);
    if (sig > 0) {
      say(absl::StrCat("got ", sig == SIGINT ? "SIGINT" : "SIGTERM", "; stopping the cluster"));
      exit_code = 128 + sig;
    }
  }

  // STOPPING: chief first, then workers, then servers.
  for (auto it = tasks.rbegin(); it != tasks.rend(); ++it) {
    if (!it->process->Poll().has_value()) it->process->Signal(SIGTERM);
  }
  for (auto it = tasks.rbegin(); it != tasks.rend(); ++it) {
    ExitInfo info = it->process->Stop(options.stop_grace);
    if (!it->reported_exit) say(absl::StrCat(it->plan->Name(), " stopped: ", info.ToString()));
    it->reported_exit = true;
  }
  for (RunningTask& t : tasks) t.reader.join();
  return exit_code;
}

}  // namespace launcher
}  // namespace psc
