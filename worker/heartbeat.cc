#include "worker/heartbeat.h"

#include <sys/random.h>

#include <random>

namespace psc {
namespace worker {

uint64_t NewIncarnation() {
  uint64_t x = 0;
  while (x == 0) {
    if (getrandom(&x, sizeof(x), 0) != static_cast<ssize_t>(sizeof(x))) {
      x = std::random_device()() | (uint64_t{std::random_device()()} << 32);
    }
  }
  return x;
}

Heartbeat::Heartbeat(CoordinatorClient* client, int task_index, uint64_t incarnation,
                     absl::Duration interval, ProgressSource progress)
    : client_(client),
      task_index_(task_index),
      incarnation_(incarnation),
      interval_(interval),
      progress_(std::move(progress)) {}

Heartbeat::~Heartbeat() { Stop(); }

void Heartbeat::Start() {
  thread_ = std::thread([this] {
    do {
      Beat().IgnoreError();  // a chief that is not there yet is tried again
    } while (!stop_.WaitForNotificationWithTimeout(interval_));
  });
}

void Heartbeat::Stop() {
  if (!stop_.HasBeenNotified()) stop_.Notify();
  if (thread_.joinable()) thread_.join();
}

absl::Status Heartbeat::Beat() {
  proto::TaskId task;
  task.set_type("worker");
  task.set_index(task_index_);
  if (!registered_) {
    proto::RegisterRequest r;
    *r.mutable_task() = task;
    r.set_incarnation(incarnation_);
    absl::Status s = client_->Register(r);
    registered_ = s.ok();
    return s;
  }
  const WorkerCore::Progress p = progress_();
  absl::Status s;
  if (p.running || !reported_idle_) {
    // A unit runs, or one just ended: its progress (and error, if any).
    proto::ReportRequest r;
    *r.mutable_task() = task;
    r.set_incarnation(incarnation_);
    r.set_unit(p.unit);
    r.set_steps_done(p.steps_done);
    r.set_error(p.error);
    s = client_->Report(r);
    reported_idle_ = s.ok() && !p.running;
  } else {
    proto::HeartbeatRequest r;
    *r.mutable_task() = task;
    r.set_incarnation(incarnation_);
    s = client_->Heartbeat(r);
  }
  if (absl::IsNotFound(s)) registered_ = false;  // the chief forgot us: register again
  return s;
}

}  // namespace worker
}  // namespace psc
