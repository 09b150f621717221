// The chief's view of which tasks have announced themselves (Register), are
// alive (Heartbeat), and what they last reported. Transport-free.
#ifndef PSC_CHIEF_TASK_REGISTRY_H_
#define PSC_CHIEF_TASK_REGISTRY_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/base/clock.h"
#include "common/cluster/cluster_config.h"

namespace psc {
namespace chief {

struct TaskRecord {
  cluster::TaskAddress task;
  uint64_t incarnation = 0;
  int registrations = 0;  // > 1 once the task restarted
  absl::Time last_seen;
  int64_t last_unit = -1;
  int64_t steps_done = 0;
  std::string last_error;
};

// Thread-safe.
class TaskRegistry {
 public:
  // `cluster` and `clock` are not owned and must outlive the registry.
  TaskRegistry(const cluster::ClusterConfig* cluster, base::Clock* clock)
      : cluster_(cluster), clock_(clock) {}

  // Records `type:index` with a new incarnation (a restart replaces the old
  // one). INVALID_ARGUMENT for an unknown type, an index outside the cluster,
  // or an incarnation of 0. Returns how many tasks are registered.
  absl::StatusOr<int> Register(const std::string& type, int index, uint64_t incarnation);

  // NOT_FOUND if the task is not registered or `incarnation` is not its
  // current one (it must register again).
  absl::Status Heartbeat(const std::string& type, int index, uint64_t incarnation);

  // Records progress of a unit (`unit` -1: none yet); same errors as
  // Heartbeat, and INVALID_ARGUMENT for steps_done < 0 or unit < -1 (the
  // record is then unchanged).
  absl::Status Report(const std::string& type, int index, uint64_t incarnation, int64_t unit,
                      int64_t steps_done, const std::string& error);

  // The evaluator `index` evaluated the checkpoint of `step`.
  // INVALID_ARGUMENT for another type, an index outside the cluster, or a
  // negative step.
  absl::Status RecordEvaluation(const std::string& type, int index, int64_t step);
  // The highest step an evaluator reported evaluated; -1: none.
  int64_t evaluated_step() const;

  std::optional<TaskRecord> Get(cluster::TaskType type, int index) const;
  int size() const;

 private:
  absl::StatusOr<cluster::TaskAddress> Resolve(const std::string& type, int index) const;
  // The record of a registered task with this incarnation, else NOT_FOUND.
  absl::StatusOr<TaskRecord*> Find(const std::string& type, int index, uint64_t incarnation)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Constant after construction.
  const cluster::ClusterConfig* const cluster_;
  base::Clock* const clock_;

  mutable absl::Mutex mu_;
  std::map<std::pair<int, int>, TaskRecord> tasks_ ABSL_GUARDED_BY(mu_);  // (type, index)
  int64_t evaluated_step_ ABSL_GUARDED_BY(mu_) = -1;
};

}  // namespace chief
}  // namespace psc

#endif  // PSC_CHIEF_TASK_REGISTRY_H_
