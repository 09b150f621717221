// The pulls a shard holds until they can be served: a sync pull waits for
// its version, an ssp pull for the slowest worker. Each ends when it is
// ready, at its deadline, or when the shard shuts down; the caller then
// serves or fails it with no lock held.
//
// Thread-compatible: the Shard calls it under its metadata lock.
#ifndef PSC_PS_SERVER_PULL_WAITERS_H_
#define PSC_PS_SERVER_PULL_WAITERS_H_

#include <functional>
#include <list>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "proto/parameter_server.pb.h"

namespace psc {
namespace ps_server {

// Called exactly once with the pull's outcome.
using PullDone = std::function<void(absl::Status)>;

class PullWaiters {
 public:
  struct Waiter {
    proto::PullRequest request;
    absl::Time deadline;
    proto::PullResponse* response;  // not owned; valid until done runs
    PullDone done;
  };

  void Add(Waiter waiter) { waiters_.push_back(std::move(waiter)); }

  // Moves out, in arrival order, the waiters whose request `ready(request)`
  // accepts.
  template <typename Ready>
  std::vector<Waiter> TakeReady(const Ready& ready) {
    std::vector<Waiter> out;
    for (auto it = waiters_.begin(); it != waiters_.end();) {
      if (ready(it->request)) {
        out.push_back(std::move(*it));
        it = waiters_.erase(it);
      } else {
        ++it;
      }
    }
    return out;
  }

  // Moves out the waiters whose deadline is at or before `now`.
  std::vector<Waiter> TakeExpired(absl::Time now);

  // Moves out every waiter (shutdown).
  std::vector<Waiter> TakeAll();

  int size() const { return static_cast<int>(waiters_.size()); }

 private:
  std::list<Waiter> waiters_;
};

}  // namespace ps_server
}  // namespace psc

#endif  // PSC_PS_SERVER_PULL_WAITERS_H_
