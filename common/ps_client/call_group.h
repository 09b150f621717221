// The calls of one PushAll or PullAll, one per shard, that stand or fall
// together: the first failure cancels the others. A step is lost anyway when
// one shard fails, and a sibling may otherwise wait for a sync step that can
// no longer complete (the other workers fail out of it without pushing),
// which would hold the worker, and the chief waiting for its unit, until the
// step timeout.
#ifndef PSC_COMMON_PS_CLIENT_CALL_GROUP_H_
#define PSC_COMMON_PS_CLIENT_CALL_GROUP_H_

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "common/ps_client/cancellation.h"

namespace psc {
namespace ps_client {

// Thread-safe.
class CallGroup {
 public:
  // What the group's calls register with.
  Cancellation* cancellation() { return &cancellation_; }

  // Records `error` (if it is the first) and cancels every call of the group.
  void Fail(const absl::Status& error) ABSL_LOCKS_EXCLUDED(mu_);
  bool failed() const { return cancellation_.cancelled(); }
  // The first error given to Fail (OK if none).
  absl::Status first_error() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  mutable absl::Mutex mu_;
  absl::Status first_error_ ABSL_GUARDED_BY(mu_);
  Cancellation cancellation_;
};

}  // namespace ps_client
}  // namespace psc

#endif  // PSC_COMMON_PS_CLIENT_CALL_GROUP_H_
