// The calls of one PushAll or PullAll, one per shard, that stand or fall
// together: the first failure cancels the others. A step is lost anyway when
// one shard fails, and a sibling may otherwise wait for a sync step that can
// no longer complete (the other workers fail out of it without pushing),
// which would hold the worker, and the chief waiting for its unit, until the
// step timeout.
#ifndef PSC_COMMON_RPC_CALL_GROUP_H_
#define PSC_COMMON_RPC_CALL_GROUP_H_

#include <set>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "common/data_channel/data_client.h"
#include "grpcpp/client_context.h"

namespace psc {
namespace rpc {

// Thread-safe.
class CallGroup {
 public:
  // Registers a call in progress. False once the group has failed (the call
  // must not start).
  bool Add(grpc::ClientContext* context) ABSL_LOCKS_EXCLUDED(mu_);
  bool Add(data_channel::DataConnection* connection) ABSL_LOCKS_EXCLUDED(mu_);
  void Remove(grpc::ClientContext* context) ABSL_LOCKS_EXCLUDED(mu_);
  void Remove(data_channel::DataConnection* connection) ABSL_LOCKS_EXCLUDED(mu_);

  // Records `error` (if it is the first) and cancels every registered call.
  void Fail(const absl::Status& error) ABSL_LOCKS_EXCLUDED(mu_);
  bool failed() const ABSL_LOCKS_EXCLUDED(mu_);
  // The first error given to Fail (OK if none).
  absl::Status first_error() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  mutable absl::Mutex mu_;
  absl::Status first_error_ ABSL_GUARDED_BY(mu_);
  std::set<grpc::ClientContext*> contexts_ ABSL_GUARDED_BY(mu_);
  std::set<data_channel::DataConnection*> connections_ ABSL_GUARDED_BY(mu_);
};

}  // namespace rpc
}  // namespace psc

#endif  // PSC_COMMON_RPC_CALL_GROUP_H_
