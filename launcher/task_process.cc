#include "launcher/task_process.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "launcher/line_prefixer.h"

namespace psc {
namespace launcher {
namespace {

// Reads `fd` to its end, emitting prefixed lines, then closes it.
void DrainPipe(int fd, const std::string& prefix, const TaskProcess::LineSink& sink,
               bool in_place) {
  LinePrefixer prefixer(prefix, sink, in_place);
  char buf[4096];
  for (;;) {
    ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    prefixer.Feed(absl::string_view(buf, static_cast<size_t>(n)));
  }
  prefixer.Flush();
  close(fd);
}

}  // namespace

TaskProcess::TaskProcess(const PlannedTask& task, std::vector<std::string> argv, LineSink sink,
                         bool in_place)
    : task_(task), argv_(std::move(argv)), sink_(std::move(sink)), in_place_(in_place) {}

TaskProcess::~TaskProcess() {
  process_.reset();  // kills a running incarnation, so its reader sees EOF
  JoinReaders();
}

absl::Status TaskProcess::Start() {
  if (process_ != nullptr && !process_->Poll().has_value()) {
    return absl::FailedPreconditionError(absl::StrCat(task_.Name(), " is still running"));
  }
  ReapFinishedReaders();
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    return absl::InternalError(
        absl::StrCat("cannot create a pipe for ", task_.Name(), ": ", std::strerror(errno)));
  }
  SubprocessOptions o;
  o.argv = argv_;
  o.env = {{"TF_CONFIG", task_.tf_config}};
  if (in_place_) o.env["PSC_PROGRESS"] = "terminal";  // common/job/progress.h
  o.stdout_fd = fds[1];
  o.stderr_fd = fds[1];
  o.die_with_parent = true;
  auto process = Subprocess::Spawn(o);
  close(fds[1]);
  if (!process.ok()) {
    close(fds[0]);
    return process.status();
  }
  process_ = *std::move(process);
  ++starts_;
  Reader reader{std::thread(), std::make_shared<std::atomic<bool>>(false)};
  reader.thread = std::thread([fd = fds[0], prefix = absl::StrCat("[", task_.Name(), "] "),
                               sink = sink_, in_place = in_place_, done = reader.done] {
    DrainPipe(fd, prefix, sink, in_place);
    done->store(true);
  });
  readers_.push_back(std::move(reader));
  return absl::OkStatus();
}

pid_t TaskProcess::pid() const { return process_ == nullptr ? 0 : process_->pid(); }

std::optional<ExitInfo> TaskProcess::Poll() {
  return process_ == nullptr ? std::nullopt : process_->Poll();
}

void TaskProcess::Signal(int sig) {
  if (process_ != nullptr) process_->Signal(sig);
}

ExitInfo TaskProcess::Stop(absl::Duration grace) {
  return process_ == nullptr ? ExitInfo{} : process_->Stop(grace);
}

void TaskProcess::JoinReaders() {
  for (Reader& r : readers_) r.thread.join();
  readers_.clear();
}

void TaskProcess::ReapFinishedReaders() {
  for (auto it = readers_.begin(); it != readers_.end();) {
    if (it->done->load()) {
      it->thread.join();
      it = readers_.erase(it);
    } else {
      ++it;
    }
  }
}

}  // namespace launcher
}  // namespace psc
