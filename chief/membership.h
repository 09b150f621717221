// Which workers take part in the job, and the one place where the chief
// declares a worker lost. A worker is lost when
//  - its heartbeats stopped: it registered with the chief's Coordinator
//    service and has not been heard from (Heartbeat or Report, see
//    task_registry.h) for heartbeat_timeout, which catches a worker that
//    hangs without failing its unit; or
//  - its unit failed and it no longer answers (a live worker whose unit
//    failed reports a server's failure: that is not a loss).
// A verdict is a Status: OK (alive) or UNAVAILABLE saying why it is lost.
// Declaring a loss removes the worker for the rest of the job, counts it,
// and tells every shard at once (UpdateMembership: replicas_to_aggregate in
// sync, the live set in ssp), so the survivors' current step completes
// without it; later units split the batch over the survivors.
//
// Thread-safe. A loss is declared and sent under one lock, so the shards see
// the losses in the order they were declared.
#ifndef PSC_CHIEF_MEMBERSHIP_H_
#define PSC_CHIEF_MEMBERSHIP_H_

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "chief/task_registry.h"
#include "chief/worker_client.h"
#include "common/base/clock.h"
#include "common/ps_client/parameter_client.h"
#include "proto/job.pb.h"

namespace psc {
namespace chief {

struct MembershipOptions {
  proto::TrainingMode mode = proto::MODE_SYNC;
  // Seats: the workers the job may hold (TF_CONFIG's and joined ones).
  int num_workers = 1;
  // A registered worker not heard from for this long is lost; zero: the
  // heartbeats are not watched.
  absl::Duration heartbeat_timeout = absl::ZeroDuration();
  // sync: the job's replicas_to_aggregate (0 = every worker). After a loss
  // the servers aggregate min(this, live workers): backups are used up
  // first.
  int32_t replicas_to_aggregate = 0;
  // Of the seats, those that take part from the start (TF_CONFIG's); the
  // others are vacant until a worker joins (0: all).
  int initial_workers = 0;
};

class Membership {
 public:
  // Not owned; `registry` may be null (no heartbeats), `clock` is required.
  Membership(const MembershipOptions& options, ps_client::ParameterClient* servers,
             WorkerClient* workers, const TaskRegistry* registry, base::Clock* clock);

  // The live workers, ascending.
  std::vector<int> live() const ABSL_LOCKS_EXCLUDED(mu_);
  bool lost(int worker) const ABSL_LOCKS_EXCLUDED(mu_);
  // A seat no worker holds: never taken yet, or its worker left drained.
  bool vacant(int worker) const ABSL_LOCKS_EXCLUDED(mu_);
  int64_t workers_lost() const ABSL_LOCKS_EXCLUDED(mu_);

  // The verdict on `worker` after its unit failed with `error`: OK if it
  // still answers (the failure was the servers', or the job's own); else it
  // is declared lost. In async and ssp, a worker that answers but could not
  // open one of its streamed training files (NOT_FOUND with
  // job::kStreamError: a volume missing on its machine) is declared lost
  // too, the first time that file is missing, unless it is the last live
  // worker: the work queue hands its units to the others, and it takes part
  // again only once restarted (a new incarnation; MayBeBack). The same file
  // missing again, or missing in sync, is the job's error (OK here;
  // chief/unit_failure.h ends the job with it).
  absl::Status JudgeFailedUnit(int worker, const absl::Status& error) ABSL_LOCKS_EXCLUDED(mu_);

  // Declares lost every live worker whose heartbeats stopped, and returns
  // them. The dispatcher calls it while it waits for a unit.
  std::vector<int> CheckHeartbeats() ABSL_LOCKS_EXCLUDED(mu_);

  // `worker`, lost before, takes part again (it answers and holds the job;
  // multi_worker_mirrored: and a peer's replica): in sync and
  // multi_worker_mirrored from the next unit on, in async and ssp at once.
  // Counted in workers_joined and, unless its seat was vacant (a new
  // worker), workers_rejoined; the servers are told (if that fails it stays
  // out, and the error is returned). FAILED_PRECONDITION if it is live.
  absl::Status Rejoin(int worker) ABSL_LOCKS_EXCLUDED(mu_);
  int64_t workers_joined() const ABSL_LOCKS_EXCLUDED(mu_);
  int64_t workers_rejoined() const ABSL_LOCKS_EXCLUDED(mu_);

  // Whether `worker` asked to leave and has no answer yet (task_registry.h).
  bool Leaving(int worker) const ABSL_LOCKS_EXCLUDED(mu_);
  // Live `worker` leaves the job, drained (no unit of it runs): not a loss.
  // `may_leave(left)`, asked under the lock that also declares losses with
  // the number of live workers that would be left, says whether the job
  // can go on without it (its error is returned, nothing changed).
  // Counted in workers_drained; its seat is vacant again (a worker that
  // takes it later has "joined"); the servers are told (that error is
  // returned with the worker out). FAILED_PRECONDITION if it is not live.
  absl::Status Retire(int worker, const std::function<absl::Status(int left)>& may_leave)
      ABSL_LOCKS_EXCLUDED(mu_);
  int64_t workers_drained() const ABSL_LOCKS_EXCLUDED(mu_);

  // Whether lost `worker` may be back: it registered or sent a heartbeat
  // after it was lost and has not left (task_registry.h), or there is no
  // registry to tell. A vacant seat: a worker joined it (never without a
  // registry). Saves probing a worker that is still down. Never the
  // incarnation that could not open a training file (JudgeFailedUnit).
  bool MayBeBack(int worker) const ABSL_LOCKS_EXCLUDED(mu_);

  // The step the job is at (the runner sets it as units start and the work
  // queue's frontier moves): changes are recorded with it.
  void set_step(int64_t step) ABSL_LOCKS_EXCLUDED(mu_);
  // Every change of membership so far, in order: the step it took effect
  // at, the worker, "lost", "rejoined", "joined" (a new worker) or
  // "drained", and why.
  struct Change {
    int64_t step = 0;
    int worker = 0;
    std::string change;
    std::string why;
  };
  std::vector<Change> changes() const ABSL_LOCKS_EXCLUDED(mu_);

  // Tells every shard the live workers (and, in sync, to aggregate one
  // gradient per live worker), completing a step that now has enough; after
  // a server restore, the restored shards learn them this way.
  absl::Status TellServers() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // Removes `worker`, counts and logs the loss, and tells the shards.
  absl::Status DeclareLost(int worker, const std::string& why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status TellServersLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Constant after construction.
  const MembershipOptions options_;
  ps_client::ParameterClient* const servers_;
  WorkerClient* const workers_;
  const TaskRegistry* const registry_;
  base::Clock* const clock_;

  mutable absl::Mutex mu_;
  std::vector<bool> live_ ABSL_GUARDED_BY(mu_);
  int64_t lost_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t joined_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t rejoined_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t drained_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<bool> vacant_ ABSL_GUARDED_BY(mu_);  // seats never taken yet
  int64_t step_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<absl::Time> lost_at_ ABSL_GUARDED_BY(mu_);
  std::vector<Change> changes_ ABSL_GUARDED_BY(mu_);
  // The training files some worker could not open (their errors, from
  // job::kStreamError on), and per worker lost for it, the incarnation
  // that stays out (0: no registry, so until the job ends).
  std::set<std::string> missing_files_ ABSL_GUARDED_BY(mu_);
  std::map<int, uint64_t> barred_ ABSL_GUARDED_BY(mu_);
};

}  // namespace chief
}  // namespace psc

#endif  // PSC_CHIEF_MEMBERSHIP_H_
