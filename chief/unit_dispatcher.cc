#include "chief/unit_dispatcher.h"

#include <algorithm>
#include <set>
#include <thread>

#include "absl/strings/match.h"
#include "absl/synchronization/mutex.h"
#include "chief/unit_failure.h"
#include "common/base/status_macros.h"
#include "common/job/record_stream.h"

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

void PinSlotsToWorkers(Unit* unit, int num_slots) {
  std::vector<bool> held(std::max(0, num_slots), false);
  for (int w : unit->workers) {
    if (w >= 0 && w < num_slots) held[w] = true;
  }
  int vacant = 0;
  for (int i = 0; i < unit->num_slots(); ++i) {
    int slot = unit->workers[i];
    if (slot >= num_slots) {  // joined: the next vacant slot
      while (vacant < num_slots && held[vacant]) ++vacant;
      slot = vacant < num_slots ? vacant++ : num_slots - 1;
    }
    unit->requests[i].set_replica_slot(slot);
    unit->requests[i].set_num_slots(num_slots);
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
      // After a refused push the other slots are not cancelled: in sync
      // the servers fail the pulls of a step that cannot complete
      // (ps_server/step_refusals.h); in async the others end their units.
      // After a worker's own job error before it pushed (its streamed
      // files: record_stream.h) no server knows the step cannot complete,
      // so the chief stops waiting for the other slots: the job ends, and
      // no later unit meets a worker still blocked in its pull.
      const bool job_error = answers && absl::StrContains(r.status().message(), job::kStreamError);
      std::vector<int> cancel;
      {
        absl::MutexLock lock(&mu);
        if (answers) first_failure_ = MoreInformative(first_failure_, r.status());
        results[i] = std::move(r);
        done[i] = true;
        --running;
        for (int j = 0; job_error && j < n; ++j) {
          if (!done[j]) cancel.push_back(unit.workers[j]);
        }
      }
      for (int other : cancel) workers_->CancelUnit(other);
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

absl::Status UnitDispatcher::RunQueue(const std::string& job_id, WorkQueue* queue,
                                      const QueueHooks& hooks,
                                      std::vector<absl::Status>* failures) {
  first_failure_ = absl::OkStatus();
  absl::Mutex mu;
  bool stop = false;              // a piece failed while its worker answers
  bool halted = false;            // the chief was asked to stop (hooks.stop)
  std::set<int> admitting;        // lost workers being taken back: not lost to Take
  int in_flight = 0;              // pieces being run
  std::multiset<int> pushing_as;  // the identities of the pieces in flight
  std::set<int> feeding;          // workers whose feeder runs
  std::set<int> running;          // workers running a piece now
  int64_t frontier = queue->frontier();
  std::vector<std::thread> threads;  // joined at the end
  // Lost, for handing out a piece given back as it: a worker being taken
  // back is not, so that nobody else starts pushing as it meanwhile.
  const std::function<bool(int)> lost = [&](int w) {
    return admitting.count(w) == 0 && membership_->lost(w);
  };
  // One feeder per worker: the next piece as soon as it is free, until the
  // queue is done (no piece left, none in flight that could come back), the
  // worker is lost, or the stretch stops.
  auto feed = [&](int w) {
    for (;;) {
      if (hooks.leave && membership_->Leaving(w) && hooks.leave(w)) {
        absl::MutexLock lock(&mu);
        feeding.erase(w);
        return;
      }
      Piece piece;
      {
        absl::MutexLock lock(&mu);
        // Until a piece for it, or the end: stopped, lost, asked to leave,
        // or nothing left and nothing in flight that could come back.
        auto wake = [&] {
          return stop || halted || membership_->lost(w) ||
                 (hooks.leave && membership_->Leaving(w)) || queue->HasFor(w, lost) ||
                 (queue->empty() && in_flight == 0);
        };
        mu.Await(absl::Condition(&wake));
        std::optional<Piece> next;
        const bool leaving = hooks.leave && membership_->Leaving(w);
        if (!stop && !halted && !membership_->lost(w) && !leaving) next = queue->Take(w, lost);
        if (!next.has_value()) {
          if (stop || halted || membership_->lost(w) || (queue->empty() && in_flight == 0)) {
            feeding.erase(w);
            return;
          }
          continue;
        }
        piece = *next;
        ++in_flight;
        pushing_as.insert(piece.push_as.value_or(w));
        running.insert(w);
      }
      absl::StatusOr<proto::UnitMetrics> r =
          RunOne(w, PieceRequest(job_id, piece, queue->num_slots()));
      const bool worker_lost = !r.ok() && !membership_->JudgeFailedUnit(w, r.status()).ok();
      absl::MutexLock lock(&mu);
      --in_flight;
      pushing_as.erase(pushing_as.find(piece.push_as.value_or(w)));
      running.erase(w);
      if (r.ok()) {
        queue->Done(piece);
        if (hooks.done) hooks.done(w, piece, *r);
        continue;
      }
      if (worker_lost) {
        queue->GiveBack(piece, w);
      } else {
        if (!absl::IsCancelled(r.status())) failures->push_back(r.status());
        first_failure_ = MoreInformative(first_failure_, r.status());
        stop = true;
      }
      feeding.erase(w);
      return;
    }
  };
  auto start = [&](int w) {  // under mu
    feeding.insert(w);
    threads.emplace_back(feed, w);
  };
  // A lost worker takes part again only once no piece pushed as it is in
  // flight (the ledger's watermark of an identity must see one pusher at a
  // time) and its feeder has ended. Its pieces given back that wait are
  // then its own again (WorkQueue::Take).
  // A worker it allows is reserved (`admitting`) until the admission ends.
  auto may_admit = [&](int w) {
    absl::MutexLock lock(&mu);
    if (stop || halted || feeding.count(w) != 0 || pushing_as.count(w) != 0) return false;
    admitting.insert(w);
    return true;
  };
  const auto admit = [&]() {
    if (!hooks.admit) return;
    const std::vector<int> joined = hooks.admit(may_admit);
    absl::MutexLock lock(&mu);
    admitting.clear();
    for (int w : joined) {
      if (feeding.count(w) == 0) start(w);
    }
  };
  admit();
  {
    absl::MutexLock lock(&mu);
    for (int w : membership_->live()) {
      if (feeding.count(w) == 0) start(w);
    }
  }
  absl::Time next_admit = clock_->Now() + hooks.admit_poll;
  for (;;) {
    bool over = false;
    int64_t reached = -1;
    {
      absl::MutexLock lock(&mu);
      auto changed = [&] { return feeding.empty() || queue->frontier() != frontier; };
      over = mu.AwaitWithTimeout(absl::Condition(&changed), poll_) && feeding.empty();
      if (queue->frontier() != frontier) reached = frontier = queue->frontier();
    }
    if (reached >= 0 && hooks.reached) hooks.reached(reached);
    if (over) {
      absl::MutexLock lock(&mu);
      if (stop || halted || queue->empty()) break;
    }
    if (over) {
      // Every worker is lost with pieces left: one that is back takes them
      // on; else the stretch cannot end.
      admit();
      next_admit = clock_->Now() + hooks.admit_poll;
      absl::MutexLock lock(&mu);
      if (feeding.empty()) break;
      continue;
    }
    // A worker whose heartbeats stopped is lost, and its piece is cancelled
    // instead of waited for (its feeder then gives the piece back).
    const std::vector<int> silent = membership_->CheckHeartbeats();
    {
      absl::MutexLock lock(&mu);
      for (int w : silent) {
        if (running.count(w) != 0) workers_->CancelUnit(w);
      }
    }
    if (hooks.stop && hooks.stop()) {
      // No piece more; those running end by themselves.
      absl::MutexLock lock(&mu);
      halted = true;
    }
    if (clock_->Now() >= next_admit) {
      admit();
      next_admit = clock_->Now() + hooks.admit_poll;
    }
  }
  for (auto& t : threads) t.join();
  if (stop) return first_failure_;
  if (halted) return absl::CancelledError("the chief was asked to stop");
  if (!queue->empty()) return absl::UnavailableError("every worker is lost");
  if (queue->frontier() != frontier && hooks.reached) hooks.reached(queue->frontier());
  return absl::OkStatus();
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
