#include "chief/work_queue.h"

#include <algorithm>

namespace psc {
namespace chief {

WorkQueue::WorkQueue(int64_t first_step, int64_t end, int64_t unit_steps, int num_slots)
    : end_(end),
      unit_steps_(std::max<int64_t>(1, unit_steps)),
      num_slots_(std::max(1, num_slots)),
      frontier_(first_step),
      next_first_(first_step) {}

bool WorkQueue::HasFor(int worker, const std::function<bool(int)>& lost) const {
  if (next_first_ < end_) return true;
  return std::any_of(given_back_.begin(), given_back_.end(),
                     [&](const Piece& p) { return *p.push_as == worker || lost(*p.push_as); });
}

std::optional<Piece> WorkQueue::Take(int worker, const std::function<bool(int)>& lost) {
  for (auto it = given_back_.begin(); it != given_back_.end(); ++it) {
    if (*it->push_as == worker || lost(*it->push_as)) {
      Piece p = *it;
      given_back_.erase(it);
      return p;
    }
  }
  if (next_first_ >= end_) return std::nullopt;
  Piece p;
  p.first_step = next_first_;
  p.end = std::min(end_, next_first_ + unit_steps_);
  p.slot = next_slot_;
  if (next_slot_ == 0) ranges_[p.first_step] = {p.end, 0};
  if (++next_slot_ == num_slots_) {
    next_slot_ = 0;
    next_first_ = p.end;
  }
  return p;
}

void WorkQueue::GiveBack(Piece piece, int as) {
  if (!piece.push_as.has_value()) piece.push_as = as;
  given_back_.push_front(piece);
}

void WorkQueue::Done(const Piece& piece) {
  auto it = ranges_.find(piece.first_step);
  if (it == ranges_.end()) return;
  ++it->second.second;
  // Ranges end where the next begins: the frontier moves over every range
  // done from the first on.
  while (!ranges_.empty() && ranges_.begin()->first == frontier_ &&
         ranges_.begin()->second.second == num_slots_) {
    frontier_ = ranges_.begin()->second.first;
    ranges_.erase(ranges_.begin());
  }
}

bool WorkQueue::WaitsAs(int worker) const {
  return std::any_of(given_back_.begin(), given_back_.end(),
                     [worker](const Piece& p) { return p.push_as == worker; });
}

proto::RunUnitRequest PieceRequest(const std::string& job_id, const Piece& piece, int num_slots) {
  proto::RunUnitRequest r;
  r.set_job_id(job_id);
  r.set_unit(piece.first_step);  // a unit is named by its first step
  r.set_first_step(piece.first_step);
  r.set_num_steps(piece.num_steps());
  r.set_replica_slot(piece.slot);
  r.set_num_slots(num_slots);
  if (piece.push_as.has_value()) r.set_push_as_worker(*piece.push_as);
  return r;
}

}  // namespace chief
}  // namespace psc
