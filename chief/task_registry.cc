#include "chief/task_registry.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"

namespace psc {
namespace chief {

TaskRegistry::TaskRegistry(const cluster::ClusterConfig* cluster, base::Clock* clock,
                           const TaskRegistryOptions& options)
    : cluster_(cluster),
      clock_(clock),
      max_workers_(std::max(options.max_workers, cluster->num_tasks(cluster::TaskType::kWorker))),
      heartbeat_timeout_(options.heartbeat_timeout) {}

absl::StatusOr<cluster::TaskAddress> TaskRegistry::Resolve(const std::string& type,
                                                           int index) const {
  PSC_ASSIGN_OR_RETURN(auto t, cluster::ParseTaskType(type));
  const int n = cluster_->num_tasks(t);
  if (t == cluster::TaskType::kWorker && index >= n && index < max_workers_) {
    // A seat: known once joined (Find looks it up).
    return cluster::TaskAddress{t, index, {}};
  }
  if (t == cluster::TaskType::kEvaluator && n == 0 && index == 0) {
    // An evaluator the chief's TF_CONFIG leaves out announces itself (TF's
    // single evaluator task): no address, the chief never calls it.
    return cluster::TaskAddress{t, index, {}};
  }
  if (index < 0 || index >= n) {
    return absl::InvalidArgumentError(absl::StrCat("task ", type, ":", index,
                                                   " is not in the cluster (which has ", n, " \"",
                                                   type, "\" task", n == 1 ? ")" : "s)"));
  }
  return cluster_->tasks(t)[index];
}

absl::StatusOr<int> TaskRegistry::Register(const std::string& type, int index,
                                           uint64_t incarnation) {
  const int workers = cluster_->num_tasks(cluster::TaskType::kWorker);
  if (type == "worker" && index >= workers) {
    return absl::OutOfRangeError(absl::StrCat(
        "worker:", index, " is beyond the chief's TF_CONFIG (", workers,
        " worker(s)): it joins the job instead (Coordinator.Join; --max_workers=", max_workers_,
        ")"));
  }
  PSC_ASSIGN_OR_RETURN(auto task, Resolve(type, index));
  if (incarnation == 0) return absl::InvalidArgumentError("incarnation must not be 0");
  absl::MutexLock lock(&mu_);
  TaskRecord& r = tasks_[{static_cast<int>(task.type), index}];
  if (r.incarnation != incarnation) {
    r = TaskRecord{task, incarnation, r.registrations + 1};
  }
  r.last_seen = clock_->Now();
  if (task.type == cluster::TaskType::kEvaluator) evaluator_announced_ = true;
  return static_cast<int>(tasks_.size());
}

absl::StatusOr<TaskRecord*> TaskRegistry::Find(const std::string& type, int index,
                                               uint64_t incarnation) {
  PSC_ASSIGN_OR_RETURN(auto task, Resolve(type, index));
  auto it = tasks_.find({static_cast<int>(task.type), index});
  if (it == tasks_.end()) {
    return absl::NotFoundError(absl::StrCat(task.Name(), " is not registered"));
  }
  if (it->second.incarnation != incarnation) {
    return absl::NotFoundError(absl::StrCat(task.Name(), " incarnation ", incarnation,
                                            " was replaced by a restart; register again"));
  }
  return &it->second;
}

absl::Status TaskRegistry::Heartbeat(const std::string& type, int index, uint64_t incarnation) {
  absl::MutexLock lock(&mu_);
  PSC_ASSIGN_OR_RETURN(auto r, Find(type, index, incarnation));
  r->last_seen = clock_->Now();
  return absl::OkStatus();
}

absl::Status TaskRegistry::Report(const std::string& type, int index, uint64_t incarnation,
                                  int64_t unit, int64_t steps_done, const std::string& error) {
  if (steps_done < 0) return absl::InvalidArgumentError("steps_done must not be negative");
  if (unit < -1) return absl::InvalidArgumentError("unit must be -1 (none yet) or a step >= 0");
  absl::MutexLock lock(&mu_);
  PSC_ASSIGN_OR_RETURN(auto r, Find(type, index, incarnation));
  r->last_seen = clock_->Now();
  r->last_unit = unit;
  r->steps_done = steps_done;
  r->last_error = error;
  return absl::OkStatus();
}

absl::Status TaskRegistry::RecordEvaluation(const std::string& type, int index, int64_t step) {
  PSC_ASSIGN_OR_RETURN(auto task, Resolve(type, index));
  if (task.type != cluster::TaskType::kEvaluator) {
    return absl::InvalidArgumentError(
        absl::StrCat("ReportEvaluation from ", task.Name(), ": only an evaluator reports one"));
  }
  if (step < 0) return absl::InvalidArgumentError("ReportEvaluation step must not be negative");
  absl::MutexLock lock(&mu_);
  evaluated_step_ = std::max(evaluated_step_, step);
  evaluator_announced_ = true;
  return absl::OkStatus();
}

int64_t TaskRegistry::evaluated_step() const {
  absl::MutexLock lock(&mu_);
  return evaluated_step_;
}

bool TaskRegistry::has_evaluator() const {
  if (cluster_->num_tasks(cluster::TaskType::kEvaluator) > 0) return true;
  absl::MutexLock lock(&mu_);
  return evaluator_announced_;
}

std::optional<TaskRecord> TaskRegistry::Get(cluster::TaskType type, int index) const {
  absl::MutexLock lock(&mu_);
  auto it = tasks_.find({static_cast<int>(type), index});
  if (it == tasks_.end()) return std::nullopt;
  return it->second;
}

int TaskRegistry::size() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(tasks_.size());
}

absl::StatusOr<int> TaskRegistry::Join(const std::string& address, int preferred,
                                       uint64_t incarnation) {
  PSC_ASSIGN_OR_RETURN(const cluster::HostPort at, cluster::ParseHostPort(address));
  if (at.host == "0.0.0.0" || at.host == "::" || at.host == "[::]" || at.port == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("join from ", address,
                     ": give the address the chief and the servers reach the worker at "
                     "(--advertise_address), not a wildcard host or port 0"));
  }
  if (incarnation == 0) return absl::InvalidArgumentError("incarnation must not be 0");
  if (preferred < -1) {
    return absl::InvalidArgumentError(
        absl::StrCat("preferred_index ", preferred, ": must be -1 (any) or a worker index"));
  }
  const std::string name = at.ToString();
  const int workers = cluster_->num_tasks(cluster::TaskType::kWorker);
  const int worker_type = static_cast<int>(cluster::TaskType::kWorker);
  absl::MutexLock lock(&mu_);
  if (joins_closed_.has_value()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "join from ", name, " refused: ", *joins_closed_, "; there is nothing to join"));
  }
  // The seat this address holds: a TF_CONFIG worker's, or one joined before.
  int seat = -1;
  for (int i = 0; i < workers; ++i) {
    if (cluster_->tasks(cluster::TaskType::kWorker)[i].address.ToString() == name) seat = i;
  }
  for (const auto& [key, r] : tasks_) {
    if (key.first == worker_type && r.joined && r.task.address.ToString() == name) {
      seat = key.second;
    }
  }
  const absl::Time now = clock_->Now();
  if (seat >= 0) {
    if (preferred >= 0 && preferred != seat) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, " is worker:", seat, "'s address, not worker:", preferred, "'s"));
    }
    auto it = tasks_.find({worker_type, seat});
    if (it != tasks_.end() && it->second.incarnation != incarnation && !it->second.leaving &&
        now - it->second.last_seen < heartbeat_timeout_) {
      return absl::AlreadyExistsError(absl::StrCat(
          name, " is worker:", seat, "'s, which is in the job (heard from ",
          absl::FormatDuration(absl::Trunc(now - it->second.last_seen, absl::Milliseconds(1))),
          " ago); a restarted worker joins once it is silent for --heartbeat_timeout=",
          absl::FormatDuration(heartbeat_timeout_)));
    }
  } else if (preferred >= 0) {
    if (preferred < workers) {
      return absl::InvalidArgumentError(
          absl::StrCat("worker:", preferred, " is ",
                       cluster_->tasks(cluster::TaskType::kWorker)[preferred].address.ToString(),
                       " in the chief's TF_CONFIG, not ", name));
    }
    if (preferred >= max_workers_) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "worker:", preferred, " (", name, ") is beyond the job's ", max_workers_,
          " worker seat(s): start the chief with a larger --max_workers to let workers join"));
    }
    if (auto it = tasks_.find({worker_type, preferred});
        it != tasks_.end() && !SeatFree(it->second)) {
      return absl::FailedPreconditionError(absl::StrCat("worker:", preferred, "'s seat is ",
                                                        it->second.task.address.ToString(),
                                                        "'s, not ", name, "'s"));
    }
    seat = preferred;
  } else {
    for (int i = workers; i < max_workers_ && seat < 0; ++i) {
      auto it = tasks_.find({worker_type, i});
      if (it == tasks_.end() || SeatFree(it->second)) seat = i;
    }
    if (seat < 0) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "join from ", name, " refused: the job's ", max_workers_, " worker seat(s) (", workers,
          " in the chief's TF_CONFIG, --max_workers=", max_workers_,
          ") are taken; start the chief with a larger --max_workers"));
    }
  }
  TaskRecord& r = tasks_[{worker_type, seat}];
  if (r.incarnation != incarnation || r.task.address.ToString() != name) {
    r = TaskRecord{cluster::TaskAddress{cluster::TaskType::kWorker, seat, at}, incarnation,
                   r.registrations + 1};
  }
  r.joined = seat >= workers;
  r.last_seen = now;
  return seat;
}

absl::StatusOr<bool> TaskRegistry::Leave(const std::string& type, int index, uint64_t incarnation) {
  absl::MutexLock lock(&mu_);
  PSC_ASSIGN_OR_RETURN(auto task, Resolve(type, index));
  auto it = tasks_.find({static_cast<int>(task.type), index});
  if (it == tasks_.end() || it->second.incarnation != incarnation) {
    return absl::NotFoundError(
        absl::StrCat(task.Name(), " incarnation ", incarnation, " is not registered"));
  }
  TaskRecord& r = it->second;
  r.last_seen = clock_->Now();
  if (closed_) return true;  // the job is over: no unit more for anyone
  r.leaving = true;
  if (!r.left.has_value()) return false;
  if (!r.left->ok()) return *r.left;
  return true;
}

bool TaskRegistry::Leaving(int index) const {
  absl::MutexLock lock(&mu_);
  auto it = tasks_.find({static_cast<int>(cluster::TaskType::kWorker), index});
  return it != tasks_.end() && it->second.leaving && !it->second.left.has_value();
}

void TaskRegistry::AnswerLeave(int index, const absl::Status& outcome) {
  absl::MutexLock lock(&mu_);
  auto it = tasks_.find({static_cast<int>(cluster::TaskType::kWorker), index});
  if (it != tasks_.end() && it->second.leaving) it->second.left = outcome;
}

void TaskRegistry::CloseJoins(const std::string& why) {
  absl::MutexLock lock(&mu_);
  if (!joins_closed_.has_value()) joins_closed_ = why;
}

void TaskRegistry::Close(const std::string& why) {
  absl::MutexLock lock(&mu_);
  joins_closed_ = why;
  closed_ = true;
}

bool TaskRegistry::SeatFree(const TaskRecord& r) {
  // A worker that left drained holds nothing: no unit of it runs, and the
  // chief answered its leave only once it was out of the job.
  return r.joined && r.left.has_value() && r.left->ok();
}

std::map<int, std::string> TaskRegistry::JoinedWorkers() const {
  absl::MutexLock lock(&mu_);
  std::map<int, std::string> out;
  for (const auto& [key, r] : tasks_) {
    const bool left = r.left.has_value() && r.left->ok();
    if (key.first == static_cast<int>(cluster::TaskType::kWorker) && r.joined && !left) {
      out[key.second] = r.task.address.ToString();
    }
  }
  return out;
}

}  // namespace chief
}  // namespace psc
