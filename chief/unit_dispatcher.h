// Units of work and how the chief hands them out. A unit covers the steps
// [first_step, end) on every live worker at once: the i-th live worker
// fills replica slot i of R = live workers, and the unit is named by its
// first step (which keeps push ids unique across chief restarts). Its
// RunUnitRequests are built once, here.
//
// The dispatcher runs every slot of a unit concurrently and waits until each
// has finished or its worker has been declared lost: after a failed unit
// (Membership::JudgeFailedUnit) or, while it waits, by its heartbeats
// (Membership::CheckHeartbeats), in which case the call is cancelled.
#ifndef PSC_CHIEF_UNIT_DISPATCHER_H_
#define PSC_CHIEF_UNIT_DISPATCHER_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "chief/error_feedback_book.h"
#include "chief/membership.h"
#include "chief/work_queue.h"
#include "chief/worker_client.h"
#include "common/base/clock.h"
#include "proto/worker.pb.h"

namespace psc {
namespace chief {

struct Unit {
  int64_t first_step = 0;
  int64_t end = 0;                              // one past the last step
  std::vector<int> workers;                     // workers[i] fills slot i
  std::vector<proto::RunUnitRequest> requests;  // requests[i] for slot i

  int num_slots() const { return static_cast<int>(workers.size()); }
  int64_t num_steps() const { return end - first_step; }
};

// The unit [first_step, end) of job `job_id` on `workers` (slot i is
// workers[i]).
Unit MakeUnit(const std::string& job_id, int64_t first_step, int64_t end,
              const std::vector<int>& workers);

// Sync with backup workers (common/job/step_batch.h): slot w of every step
// is worker w's (num_slots = the job's configured workers), so a lost
// worker's slice is left unread instead of the batch split again; a worker
// that joined beyond them takes a vacant slot (the lowest not held by its
// own worker). At most num_slots workers.
void PinSlotsToWorkers(Unit* unit, int num_slots);

// Thread-safe; one Run at a time.
class UnitDispatcher {
 public:
  // Not owned. Heartbeats are checked every `poll` while a unit runs.
  // `clock` times RunQueue's admissions (null: the system clock).
  UnitDispatcher(WorkerClient* workers, Membership* membership,
                 absl::Duration poll = absl::Seconds(1), base::Clock* clock = nullptr)
      : workers_(workers),
        membership_(membership),
        poll_(poll),
        clock_(clock != nullptr ? clock : &real_clock_) {}

  // Runs every slot of `unit`; result i is slot i's. A slot whose worker was
  // lost fails (its worker is then membership->lost()); a slot that failed
  // with its worker alive carries the servers' failure.
  std::vector<absl::StatusOr<proto::UnitMetrics>> Run(const Unit& unit);

  // Of the last Run: the first failure, in the order they came, of a slot
  // whose worker answers, not counting cancellations (MoreInformative); OK
  // when there was none.
  const absl::Status& first_failure() const { return first_failure_; }

  // Called (on a dispatcher thread) for each worker of a running unit that
  // is declared lost, before the unit's other slots are waited for
  // (multi_worker_mirrored abandons the unit's group: its other members
  // cannot complete a step). Call before Run.
  void set_on_lost(std::function<void(const Unit&, int worker)> on_lost) {
    on_lost_ = std::move(on_lost);
  }

  // --topk_ratio: every unit a worker runs (Run's slots, Redo) brings the
  // residuals `book` says it lacks, and its result (or failure) is recorded
  // there; a unit sent without them that fails FAILED_PRECONDITION (the
  // worker restarted and holds none) is run once more with them. Not owned;
  // null: none. Call before Run.
  void set_error_feedback(ErrorFeedbackBook* book) { book_ = book; }

  // async and ssp: runs the pieces of `queue` (work_queue.h) on the live
  // workers, each taking the next piece as soon as it is free, until every
  // piece is done; a worker lost meanwhile gives its piece back. Every
  // admit_poll, `admit` is asked for workers that take part again (lost
  // before; they must not be lost now): each gets pieces from then on.
  // `done` is called (under the dispatcher's lock) for every piece done.
  // Returns OK, or, once a piece failed while its worker answers (the
  // servers', or the job's own failure: the failures are in `failures`),
  // that failure after the pieces in flight ended; UNAVAILABLE when every
  // worker is lost.
  struct QueueHooks {
    std::function<void(int worker, const Piece&, const proto::UnitMetrics&)> done;
    // Called on the dispatching thread; may block for a probe. The workers
    // it returns must be live. `may_admit(w)` true reserves w: no other
    // worker takes a piece pushed as w until `admit` returns.
    std::function<std::vector<int>(const std::function<bool(int)>& may_admit)> admit;
    absl::Duration admit_poll = absl::Seconds(5);
    // Called on the dispatching thread, with no lock held, each time the
    // queue's frontier moves (every piece up to that step is done), while
    // the pieces after it go on (the progress line). May be null.
    std::function<void(int64_t frontier)> reached;
    // Polled on the dispatching thread: once true, no piece more is handed
    // out, and RunQueue returns CANCELLED when the running ones end. May be
    // null.
    std::function<bool()> stop;
    // A worker that asked to leave (Membership::Leaving) between two of its
    // pieces, on its feeder's thread with no lock held: true when it is
    // out of the job (its feeder ends), false when it stays. May be null.
    std::function<bool(int worker)> leave;
  };
  absl::Status RunQueue(const std::string& job_id, WorkQueue* queue, const QueueHooks& hooks,
                        std::vector<absl::Status>* failures);

 private:
  WorkerClient* const workers_;
  Membership* const membership_;
  const absl::Duration poll_;
  base::RealClock real_clock_;
  base::Clock* const clock_;
  std::function<void(const Unit&, int)> on_lost_;
  ErrorFeedbackBook* book_ = nullptr;
  absl::Status first_failure_;  // of the last Run
  // workers_->RunUnit with book_'s residuals attached and the result
  // recorded.
  absl::StatusOr<proto::UnitMetrics> RunOne(int worker, proto::RunUnitRequest request);
};

}  // namespace chief
}  // namespace psc

#endif  // PSC_CHIEF_UNIT_DISPATCHER_H_
