// The chief's view of which tasks have announced themselves (Register), are
// alive (Heartbeat), and what they last reported; and of the workers beyond
// its TF_CONFIG that took a seat of the job (Join) and of those that asked
// to leave (Leave). Transport-free.
//
// Seats (docs/guide/membership.md): workers 0..W-1 are the TF_CONFIG's;
// seats W..max_workers-1 go to joining workers, lowest first, each for its
// address: the same address joining again is the same worker restarted. A
// seat whose worker left drained is free for any address; a lost worker's
// stays its address's (its identity may still push).
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
  bool joined = false;   // a seat beyond the TF_CONFIG's workers (Join)
  bool leaving = false;  // this incarnation asked to leave (Leave)
  // The chief's answer to the leave: OK (out of the job) or why it cannot
  // leave; unset while it is pending.
  std::optional<absl::Status> left;
};

struct TaskRegistryOptions {
  // Workers the job may hold, TF_CONFIG's included; 0: TF_CONFIG's count
  // (nobody joins).
  int max_workers = 0;
  // A worker heard from within this long is alive: its address cannot be
  // joined by another process.
  absl::Duration heartbeat_timeout = absl::Seconds(30);
};

// Thread-safe.
class TaskRegistry {
 public:
  // `cluster` and `clock` are not owned and must outlive the registry.
  TaskRegistry(const cluster::ClusterConfig* cluster, base::Clock* clock,
               const TaskRegistryOptions& options = {});

  // Records `type:index` with a new incarnation (a restart replaces the old
  // one). INVALID_ARGUMENT for an unknown type, an index outside the cluster
  // (evaluator:0 is always in it: an evaluator the TF_CONFIG leaves out
  // announces itself, see has_evaluator), or an incarnation of 0;
  // OUT_OF_RANGE for a worker index beyond the TF_CONFIG's workers (it
  // joins instead). Returns how many tasks are registered.
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
  // INVALID_ARGUMENT for another type, an index outside the cluster (as
  // Register: evaluator:0 is in it), or a negative step.
  absl::Status RecordEvaluation(const std::string& type, int index, int64_t step);
  // The highest step an evaluator reported evaluated; -1: none.
  int64_t evaluated_step() const;
  // Whether the job has an evaluator to wait for: the chief's TF_CONFIG
  // lists one, or one announced itself (Register or ReportEvaluation as
  // evaluator:0 while the TF_CONFIG lists none: docker-compose's evaluator
  // is a profile the chief's TF_CONFIG leaves out).
  bool has_evaluator() const ABSL_LOCKS_EXCLUDED(mu_);

  std::optional<TaskRecord> Get(cluster::TaskType type, int index) const;
  int size() const;

  // A worker at `address` takes a seat: the one its address holds, else
  // `preferred` (-1: the lowest free one). The index; the errors of
  // Coordinator.Join (proto/coordinator.proto).
  absl::StatusOr<int> Join(const std::string& address, int preferred, uint64_t incarnation)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Worker `index` under `incarnation` asks to leave: true once the chief
  // took it out of the job (or the job ended), false while pending, the
  // chief's refusal as an error. NOT_FOUND as Heartbeat.
  absl::StatusOr<bool> Leave(const std::string& type, int index, uint64_t incarnation)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Whether worker `index` asked to leave and has no answer yet.
  bool Leaving(int index) const ABSL_LOCKS_EXCLUDED(mu_);
  // The chief's answer to worker `index`'s leave (OK: it is out).
  void AnswerLeave(int index, const absl::Status& outcome) ABSL_LOCKS_EXCLUDED(mu_);
  // The chief is stopping: no join from now on (FAILED_PRECONDITION with
  // `why`); leaves are still answered by the chief as units end.
  void CloseJoins(const std::string& why) ABSL_LOCKS_EXCLUDED(mu_);
  // The job is over: no join, and every leave is answered at once.
  void Close(const std::string& why) ABSL_LOCKS_EXCLUDED(mu_);
  // The addresses of the workers that joined and have not left, by index.
  std::map<int, std::string> JoinedWorkers() const ABSL_LOCKS_EXCLUDED(mu_);
  int max_workers() const { return max_workers_; }
  const cluster::ClusterConfig& cluster() const { return *cluster_; }

 private:
  absl::StatusOr<cluster::TaskAddress> Resolve(const std::string& type, int index) const;
  // Whether a joined seat is free for another address: its worker left.
  static bool SeatFree(const TaskRecord& r);
  // The record of a registered task with this incarnation, else NOT_FOUND.
  absl::StatusOr<TaskRecord*> Find(const std::string& type, int index, uint64_t incarnation)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Constant after construction.
  const cluster::ClusterConfig* const cluster_;
  base::Clock* const clock_;
  const int max_workers_;
  const absl::Duration heartbeat_timeout_;

  mutable absl::Mutex mu_;
  std::map<std::pair<int, int>, TaskRecord> tasks_ ABSL_GUARDED_BY(mu_);  // (type, index)
  int64_t evaluated_step_ ABSL_GUARDED_BY(mu_) = -1;
  bool evaluator_announced_ ABSL_GUARDED_BY(mu_) = false;         // registered or reported
  std::optional<std::string> joins_closed_ ABSL_GUARDED_BY(mu_);  // why no join is taken
  bool closed_ ABSL_GUARDED_BY(mu_) = false;                      // the job is over
};

}  // namespace chief
}  // namespace psc

#endif  // PSC_CHIEF_TASK_REGISTRY_H_
