// Calls that end together. Each call in flight registers how to end it (a
// gRPC context's TryCancel, a socket's shutdown); Cancel runs every hook and
// refuses new calls. A client's CancelAll is one Cancellation; every
// PushAll and PullAll has another (its CallGroup), so that the first shard
// to fail ends its siblings' calls.
//
// An Attempt is one try of one call to one shard: its timeout and the
// Cancellations it belongs to. A transport holds a CancelScope for as long
// as the attempt runs.
#ifndef PSC_COMMON_PS_CLIENT_CANCELLATION_H_
#define PSC_COMMON_PS_CLIENT_CANCELLATION_H_

#include <functional>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace psc {
namespace ps_client {

// Thread-safe.
class Cancellation {
 public:
  // Registers `hook` under `key` (unique among the calls in flight). False,
  // and not registered, once cancelled: the call must not start.
  bool Add(const void* key, std::function<void()> hook) ABSL_LOCKS_EXCLUDED(mu_);
  void Remove(const void* key) ABSL_LOCKS_EXCLUDED(mu_);
  // Runs every registered hook (under the lock: a hook must not call back
  // into this Cancellation) and refuses new calls. Idempotent.
  void Cancel() ABSL_LOCKS_EXCLUDED(mu_);
  // Runs every registered hook (as Cancel does) but goes on accepting calls.
  void Interrupt() ABSL_LOCKS_EXCLUDED(mu_);
  bool cancelled() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  mutable absl::Mutex mu_;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::pair<const void*, std::function<void()>>> hooks_ ABSL_GUARDED_BY(mu_);
};

struct Attempt {
  absl::Duration timeout;  // of this try alone
  // The Cancellations the call belongs to; null entries are skipped.
  Cancellation* scopes[2] = {nullptr, nullptr};
};

// Registers `hook` with every Cancellation of `attempt` for the scope's
// life. Not copyable; a transport makes one per try.
class CancelScope {
 public:
  CancelScope(const Attempt& attempt, std::function<void()> hook);
  ~CancelScope();
  CancelScope(const CancelScope&) = delete;
  CancelScope& operator=(const CancelScope&) = delete;

  // False when a Cancellation was already cancelled: do not start the call.
  bool ok() const { return ok_; }

 private:
  const Attempt& attempt_;
  bool added_[2] = {false, false};
  bool ok_ = true;
};

}  // namespace ps_client
}  // namespace psc

#endif  // PSC_COMMON_PS_CLIENT_CANCELLATION_H_
