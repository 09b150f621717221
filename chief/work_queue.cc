#include "chief/work_queue.h"

#include <algorithm>

namespace psc {
namespace chief {

void WorkQueue::IndexSet::Add(int64_t k) {
  auto next = runs_.upper_bound(k);  // the first run starting after k
  if (next != runs_.begin()) {
    auto prev = std::prev(next);
    if (prev->second > k) return;  // already in
    if (prev->second == k) {
      prev->second = k + 1;
      if (next != runs_.end() && next->first == k + 1) {
        prev->second = next->second;
        runs_.erase(next);
      }
      return;
    }
  }
  int64_t end = k + 1;
  if (next != runs_.end() && next->first == k + 1) {
    end = next->second;
    runs_.erase(next);
  }
  runs_.emplace(k, end);
}

int64_t WorkQueue::IndexSet::FirstMissing() const {
  return !runs_.empty() && runs_.begin()->first == 0 ? runs_.begin()->second : 0;
}

namespace {

// The ranges of at most unit_steps in [first_step, end).
int64_t NumRanges(int64_t first_step, int64_t end, int64_t unit_steps) {
  if (end <= first_step) return 0;
  const int64_t steps = end - first_step;
  return steps / unit_steps + (steps % unit_steps != 0 ? 1 : 0);
}

}  // namespace

WorkQueue::WorkQueue(int64_t first_step, int64_t end, int64_t unit_steps, int num_slots,
                     bool keep_slots)
    : first_(first_step),
      end_(end),
      unit_steps_(std::max<int64_t>(1, unit_steps)),
      num_slots_(std::max(1, num_slots)),
      keep_slots_(keep_slots),
      num_ranges_(NumRanges(first_step, end, unit_steps_)),
      handed_(num_slots_, 0),
      done_(num_slots_) {}

bool WorkQueue::all_handed() const {
  return std::all_of(handed_.begin(), handed_.end(),
                     [this](int64_t h) { return h >= num_ranges_; });
}

bool WorkQueue::HasFor(int worker, const std::function<bool(int)>& lost) const {
  if (!all_handed()) return true;
  return std::any_of(given_back_.begin(), given_back_.end(),
                     [&](const Piece& p) { return *p.push_as == worker || lost(*p.push_as); });
}

Piece WorkQueue::Hand(int worker, int s) {
  const int64_t k = handed_[s]++;
  last_[worker] = s;
  Piece p;
  p.first_step = first_ + k * unit_steps_;
  p.end = std::min(end_, p.first_step + unit_steps_);
  p.slot = s;
  return p;
}

int WorkQueue::KeptSlot(int worker, const std::function<bool(int)>& lost) const {
  auto left = [this](int s) { return num_ranges_ - handed_[s]; };
  // Whether no other live worker keeps slot s.
  auto free = [&](int s) {
    return std::none_of(last_.begin(), last_.end(), [&](const auto& e) {
      return e.first != worker && e.second == s && !lost(e.first);
    });
  };
  // A slot nobody else keeps, else any; the most pieces left first.
  int best = -1;
  bool best_free = false;
  for (int s = 0; s < num_slots_; ++s) {
    if (left(s) == 0) continue;
    const bool f = free(s);
    if (best < 0 || (f && !best_free) || (f == best_free && left(s) > left(best))) {
      best = s;
      best_free = f;
    }
  }
  // Its own slot, unless another worker keeps it too (one came back to
  // find it taken) while a slot nobody keeps waits.
  if (auto it = last_.find(worker); it != last_.end() && left(it->second) > 0) {
    if (free(it->second) || !best_free) return it->second;
  }
  return best;
}

std::optional<Piece> WorkQueue::Take(int worker, const std::function<bool(int)>& lost) {
  for (auto it = given_back_.begin(); it != given_back_.end(); ++it) {
    if (*it->push_as == worker || lost(*it->push_as)) {
      Piece p = *it;
      given_back_.erase(it);
      return p;
    }
  }
  if (all_handed()) return std::nullopt;
  if (keep_slots_) return Hand(worker, KeptSlot(worker, lost));
  // In order: the first range with a slot not handed out, its first such.
  int best = 0;
  for (int s = 1; s < num_slots_; ++s) {
    if (handed_[s] < handed_[best]) best = s;
  }
  return Hand(worker, best);
}

void WorkQueue::GiveBack(Piece piece, int as) {
  if (!piece.push_as.has_value()) piece.push_as = as;
  given_back_.push_front(piece);
}

void WorkQueue::Done(const Piece& piece) {
  if (piece.first_step < first_ || piece.first_step >= end_ || piece.slot < 0 ||
      piece.slot >= num_slots_) {
    return;
  }
  done_[piece.slot].Add((piece.first_step - first_) / unit_steps_);
}

int64_t WorkQueue::frontier() const {
  int64_t k = num_ranges_;
  for (const IndexSet& d : done_) k = std::min(k, d.FirstMissing());
  return k >= num_ranges_ ? std::max(first_, end_) : first_ + k * unit_steps_;
}

bool WorkQueue::WaitsAs(int worker) const {
  return std::any_of(given_back_.begin(), given_back_.end(),
                     [worker](const Piece& p) { return p.push_as == worker; });
}

void WorkQueue::Follows(int worker, int slot) {
  if (slot >= 0 && slot < num_slots_) last_[worker] = slot;
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
