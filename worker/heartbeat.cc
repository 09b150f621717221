#include "worker/heartbeat.h"

#include "absl/strings/str_cat.h"

namespace psc {
namespace worker {

bool IsFinalRefusal(const absl::Status& s) {
  switch (s.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kResourceExhausted:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kOutOfRange:
    case absl::StatusCode::kUnauthenticated:
    case absl::StatusCode::kPermissionDenied:
    case absl::StatusCode::kUnimplemented:
      return true;
    default:
      return false;
  }
}

Heartbeat::Heartbeat(CoordinatorClient* client, int task_index, uint64_t incarnation,
                     absl::Duration interval, ProgressSource progress, std::string address,
                     bool joined, std::function<void(const absl::Status&)> refused,
                     std::function<void()> forgotten)
    : client_(client),
      task_index_(task_index),
      incarnation_(incarnation),
      interval_(interval),
      progress_(std::move(progress)),
      address_(std::move(address)),
      refused_(std::move(refused)),
      forgotten_(std::move(forgotten)),
      joins_(joined) {}

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
  if (!registered_ && !joins_) {
    proto::RegisterRequest r;
    *r.mutable_task() = task;
    r.set_incarnation(incarnation_);
    absl::Status s = client_->Register(r);
    registered_ = s.ok();
    // Beyond the chief's TF_CONFIG (a scaled TFJob): join instead.
    if (!absl::IsOutOfRange(s) || address_.empty()) return s;
    joins_ = true;
  }
  if (!registered_) {
    proto::JoinRequest r;
    r.set_address(address_);
    r.set_incarnation(incarnation_);
    r.set_preferred_index(task_index_);
    absl::StatusOr<proto::JoinResponse> joined = client_->Join(r);
    absl::Status s = joined.status();
    if (joined.ok() && joined->index() != task_index_) {
      s = absl::FailedPreconditionError(absl::StrCat("the chief gave worker:", joined->index(),
                                                     "'s seat to worker:", task_index_));
    }
    registered_ = s.ok();
    if (absl::IsAlreadyExists(s)) {
      // Itself before a restart, until the chief has not heard from that
      // for --heartbeat_timeout; for good after kAddressInUseWait of beats.
      ++address_in_use_beats_;
      if (interval_ * address_in_use_beats_ >= kAddressInUseWait && refused_) refused_(s);
      return s;
    }
    address_in_use_beats_ = 0;
    if (!s.ok() && IsFinalRefusal(s) && refused_) refused_(s);
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
  if (absl::IsNotFound(s)) {  // the chief forgot us: register (or join) again
    registered_ = false;
    if (joins_ && forgotten_) forgotten_();
  }
  return s;
}

}  // namespace worker
}  // namespace psc
