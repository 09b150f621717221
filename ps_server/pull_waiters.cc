#include "ps_server/pull_waiters.h"

#include <iterator>

namespace psc {
namespace ps_server {

std::vector<PullWaiters::Waiter> PullWaiters::TakeExpired(absl::Time now) {
  std::vector<Waiter> out;
  for (auto it = waiters_.begin(); it != waiters_.end();) {
    if (it->deadline <= now) {
      out.push_back(std::move(*it));
      it = waiters_.erase(it);
    } else {
      ++it;
    }
  }
  return out;
}

std::vector<PullWaiters::Waiter> PullWaiters::TakeAll() {
  std::vector<Waiter> out(std::make_move_iterator(waiters_.begin()),
                          std::make_move_iterator(waiters_.end()));
  waiters_.clear();
  return out;
}

}  // namespace ps_server
}  // namespace psc
