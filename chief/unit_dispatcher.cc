#include "chief/unit_dispatcher.h"

#include <algorithm>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "chief/unit_failure.h"
#include "common/base/status_macros.h"

namespace psc {
namespace chief {

Unit MakeUnit(const std::string& job_id, int64_t first_step, int64_t end,
              const std::vector<int>& workers) {
  Unit unit;
  unit.first_step = first_step;
  unit.end = end;
  unit.workers = workers;
  for (int i = 0; i < unit.num_slots(); ++i) {
    proto::RunUnitRequest r;
    r.set_job_id(job_id);
    r.set_unit(first_step);  // a unit is named by its first step
    r.set_first_step(first_step);
    r.set_num_steps(end - first_step);
    r.set_replica_slot(i);
    r.set_num_slots(unit.num_slots());
    unit.requests.push_back(std::move(r));
  }
  return unit;
}

void PinSlotsToWorkers(Unit* unit, int num_workers) {
  for (int i = 0; i < unit->num_slots(); ++i) {
    unit->requests[i].set_replica_slot(unit->workers[i]);
    unit->requests[i].set_num_slots(num_workers);
  }
}

std::vector<absl::StatusOr<proto::UnitMetrics>> UnitDispatcher::Run(const Unit& unit) {
  const int n = unit.num_slots();
  std::vector<absl::StatusOr<proto::UnitMetrics>> results(n, absl::UnknownError("not run"));
  first_failure_ = absl::OkStatus();
  absl::Mutex mu;
  std::vector<bool> done(n, false);
  int running = n;
  std::vector<std::thread> threads;
  for (int i = 0; i < n; ++i) {
    threads.emplace_back([&, i] {
      const int w = unit.workers[i];
      absl::StatusOr<proto::UnitMetrics> r = RunOne(w, unit.requests[i]);
      bool answers = false;  // failed with its worker alive
      if (!r.ok()) {
        absl::Status verdict = membership_->JudgeFailedUnit(w, r.status());
        if (!verdict.ok()) {
          r = verdict;
          if (on_lost_) on_lost_(unit, w);
        } else {
          answers = true;
        }
      }
      // The other slots are not cancelled after a job error: cancelling the
      // chief's call does not stop a worker blocked in a push, whose next
      // unit would then find "a unit is already running". In sync the
      // servers fail the pulls of a step that cannot complete
      // (ps_server/step_refusals.h); in async the others end their units.
      absl::MutexLock lock(&mu);
      if (answers) first_failure_ = MoreInformative(first_failure_, r.status());
      results[i] = std::move(r);
      done[i] = true;
      --running;
    });
  }
  auto finished = [&running]() { return running == 0; };
  for (;;) {
    {
      absl::MutexLock lock(&mu);
      if (mu.AwaitWithTimeout(absl::Condition(&finished), poll_)) break;
    }
    // While the slots run: a worker whose heartbeats stopped is lost, and
    // its call is cancelled instead of waited for.
    const std::vector<int> lost = membership_->CheckHeartbeats();
    if (on_lost_) {
      for (int w : lost) {
        if (std::find(unit.workers.begin(), unit.workers.end(), w) != unit.workers.end()) {
          on_lost_(unit, w);
        }
      }
    }
    absl::MutexLock lock(&mu);
    for (int i = 0; i < n; ++i) {
      for (int w : lost) {
        if (unit.workers[i] == w && !done[i]) workers_->CancelUnit(w);
      }
    }
  }
  for (auto& t : threads) t.join();
  return results;
}

absl::StatusOr<proto::UnitMetrics> UnitDispatcher::Redo(const Unit& unit, int slot, int heir) {
  proto::RunUnitRequest r = unit.requests[slot];
  r.set_push_as_worker(unit.workers[slot]);
  return RunOne(heir, std::move(r));
}

absl::StatusOr<proto::UnitMetrics> UnitDispatcher::RunOne(int worker,
                                                          proto::RunUnitRequest request) {
  if (book_ == nullptr) return workers_->RunUnit(worker, request);
  PSC_RETURN_IF_ERROR(book_->Attach(worker, &request));
  absl::StatusOr<proto::UnitMetrics> r = workers_->RunUnit(worker, request);
  if (absl::IsFailedPrecondition(r.status()) && !request.has_error_feedback()) {
    // The worker lacks the residuals the book believed it held (it
    // restarted, and the worker client started the job on it again): once
    // more with them. Its pushes are exactly once, so a second run is safe.
    book_->Forget(worker);
    PSC_RETURN_IF_ERROR(book_->Attach(worker, &request));
    r = workers_->RunUnit(worker, request);
  }
  if (r.ok()) {
    if (absl::Status s = book_->Record(worker, *r); !s.ok()) return s;
    r->clear_error_feedback();  // kept in the book, not in the report
  } else {
    book_->Forget(worker);
  }
  return r;
}

}  // namespace chief
}  // namespace psc
