// Push-then-pull on a Shard, shared by both transports (the gRPC service and
// the data channel), so that they answer a PushRequest the same way.
#ifndef PSC_PS_SERVER_SHARD_CALLS_H_
#define PSC_PS_SERVER_SHARD_CALLS_H_

#include <functional>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "proto/parameter_server.pb.h"
#include "ps_server/shard.h"

namespace psc {
namespace ps_server {

// Shard::Push; then, with request.pull_after() and a successful push, the
// variables in the same answer once the shard reaches pull_min_version (the
// combined push-and-pull: one round trip). `done` runs exactly once, maybe
// before this returns; `response` must stay valid until it runs.
void PushThenPull(Shard* shard, const proto::PushRequest& request, absl::Time pull_deadline,
                  proto::PushResponse* response, std::function<void(absl::Status)> done);

// Blocking forms for callers with a thread to spare (the data channel). They
// rely on someone calling shard->ExpireWaiters() to end a wait at its
// deadline (the gRPC service's deadline thread does).
absl::Status PushThenPullBlocking(Shard* shard, const proto::PushRequest& request,
                                  absl::Time pull_deadline, proto::PushResponse* response);
absl::Status PullBlocking(Shard* shard, const proto::PullRequest& request, absl::Time deadline,
                          proto::PullResponse* response);

}  // namespace ps_server
}  // namespace psc

#endif  // PSC_PS_SERVER_SHARD_CALLS_H_
