// The work queue of async and ssp (docs/guide/membership.md): the steps
// between two barriers (an epoch end, a checkpoint step, a validation
// point, the end of the job) cut into pieces of work, each a
// range of at most unit_steps steps of one replica slot r of R, R the job's
// configured worker count. A piece's examples are those of its steps' slot
// r of R (common/data/batch_plan.h), whichever worker trains it, so every
// example of the stretch is trained exactly once, by exactly one piece.
//
// Pieces are handed out in order (by step range, then slot) to whichever
// worker asks; a lost worker's piece is given back to the front, to be run
// by another worker pushing as the lost one (push_as_worker), so that the
// steps it had pushed are duplicates (ps_server/push_ledger.h).
//
// With kept slots (streamed data files, common/job/record_stream.h: a
// slot's examples are a stream that is cheap to continue and dear to
// skip into) a worker keeps to a slot instead: it takes the next piece of
// the slot it took last while that slot has pieces left, else the next
// piece of a slot no other live worker keeps (the most pieces left first),
// else of the slot with the most pieces left. Each slot's pieces still go
// out in step order, whoever takes them: the servers' ledger
// (ps_server/push_ledger.h) needs a worker's pushes of a slot to go up in
// steps, so no worker may take a slot's later piece and then an earlier one
// (splitting a run in the middle would). Every piece is handed out once; a
// fast worker trains more of them, as in order.
//
// Thread-compatible: the dispatcher calls it under its lock.
#ifndef PSC_CHIEF_WORK_QUEUE_H_
#define PSC_CHIEF_WORK_QUEUE_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "proto/worker.pb.h"

namespace psc {
namespace chief {

struct Piece {
  int64_t first_step = 0;
  int64_t end = 0;  // one past the last step
  int slot = 0;     // replica slot r of the queue's num_slots
  // Set when the piece is a lost worker's, given back: it is pushed as that
  // worker.
  std::optional<int> push_as;

  int64_t num_steps() const { return end - first_step; }
  bool operator==(const Piece& o) const {
    return first_step == o.first_step && end == o.end && slot == o.slot && push_as == o.push_as;
  }
};

class WorkQueue {
 public:
  // The pieces of the steps [first_step, end): ranges of at most unit_steps
  // steps (>= 1), each in num_slots (>= 1) pieces; in order, or with kept
  // slots.
  WorkQueue(int64_t first_step, int64_t end, int64_t unit_steps, int num_slots,
            bool keep_slots = false);

  // The next piece for `worker`, or none when every piece has been handed
  // out. A piece given back, pushed as X, goes first, but only to X itself
  // or, while X is lost (`lost(X)`), to any worker: one worker at a time
  // pushes as X.
  std::optional<Piece> Take(int worker, const std::function<bool(int)>& lost);
  // Whether Take would give `worker` a piece.
  bool HasFor(int worker, const std::function<bool(int)>& lost) const;
  // A piece of a worker that was lost, handed out again before any other,
  // pushed as `as` unless it already pushes as another.
  void GiveBack(Piece piece, int as);

  // `piece` (handed out by Take) was trained.
  void Done(const Piece& piece);
  // The step up to which every piece is done: the stretch's first step
  // until the first range is done, its end once every piece is.
  int64_t frontier() const;

  // Whether a piece given back to be pushed as `worker` waits here.
  bool WaitsAs(int worker) const;
  bool empty() const { return given_back_.empty() && all_handed(); }
  int num_slots() const { return num_slots_; }

  // Kept slots across stretches: `worker` last trained slot `slot` up to
  // this queue's first step, so it keeps that slot.
  void Follows(int worker, int slot);
  // Per worker, the slot of the last piece it took in order (not a piece
  // given back), or given to Follows.
  const std::map<int, int>& last_slots() const { return last_; }

 private:
  // Disjoint ranges of range indices [first, end), merged as they grow.
  class IndexSet {
   public:
    void Add(int64_t k);
    // The first index not in the set.
    int64_t FirstMissing() const;

   private:
    std::map<int64_t, int64_t> runs_;  // first -> end
  };
  // Hands out slot s's next piece.
  Piece Hand(int worker, int s);
  // The slot whose next piece `worker` takes with kept slots (one has
  // pieces left).
  int KeptSlot(int worker, const std::function<bool(int)>& lost) const;
  bool all_handed() const;

  const int64_t first_;
  const int64_t end_;
  const int64_t unit_steps_;
  const int num_slots_;
  const bool keep_slots_;
  const int64_t num_ranges_;
  std::deque<Piece> given_back_;
  std::vector<int64_t> handed_;  // per slot, its first ranges handed out in order
  std::vector<IndexSet> done_;   // per slot, its ranges done (in any order)
  // Per worker, the slot of its last piece taken in order.
  std::map<int, int> last_;
};

// The RunUnitRequest of `piece` in job `job_id`: a unit named by its first
// step, slot piece.slot of num_slots.
proto::RunUnitRequest PieceRequest(const std::string& job_id, const Piece& piece, int num_slots);

}  // namespace chief
}  // namespace psc

#endif  // PSC_CHIEF_WORK_QUEUE_H_
