#include "chief/task_registry.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"

namespace psc {
namespace chief {

absl::StatusOr<cluster::TaskAddress> TaskRegistry::Resolve(const std::string& type,
                                                           int index) const {
  PSC_ASSIGN_OR_RETURN(auto t, cluster::ParseTaskType(type));
  const int n = cluster_->num_tasks(t);
  if (index < 0 || index >= n) {
    return absl::InvalidArgumentError(absl::StrCat("task ", type, ":", index,
                                                   " is not in the cluster (which has ", n, " \"",
                                                   type, "\" task", n == 1 ? ")" : "s)"));
  }
  return cluster_->tasks(t)[index];
}

absl::StatusOr<int> TaskRegistry::Register(const std::string& type, int index,
                                           uint64_t incarnation) {
  PSC_ASSIGN_OR_RETURN(auto task, Resolve(type, index));
  if (incarnation == 0) return absl::InvalidArgumentError("incarnation must not be 0");
  absl::MutexLock lock(&mu_);
  TaskRecord& r = tasks_[{static_cast<int>(task.type), index}];
  if (r.incarnation != incarnation) {
    r = TaskRecord{task, incarnation, r.registrations + 1};
  }
  r.last_seen = clock_->Now();
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
  return absl::OkStatus();
}

int64_t TaskRegistry::evaluated_step() const {
  absl::MutexLock lock(&mu_);
  return evaluated_step_;
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

}  // namespace chief
}  // namespace psc
