// A parameter server's shard as every transport serves it. The gRPC service
// (ps_service.h), the data channel's handler (data_handler.h) and the
// in-process transport of the tests (tests/testing/in_process_cluster.h)
// are thin adapters over one ShardServer, so they all run the same code:
// the check that Configure names this server's shard, push-then-pull (a
// Push with pull_after answers with the variables, one round trip), the cap
// on how long a pull may wait, and the timer that ends waits at their
// deadlines.
//
// Lifecycle: SERVING (from construction; the timer runs) -> STOPPED (Stop:
// every waiting pull fails UNAVAILABLE, new waits are refused, the timer
// ends). Thread-safe.
#ifndef PSC_PS_SERVER_SHARD_SERVER_H_
#define PSC_PS_SERVER_SHARD_SERVER_H_

#include <functional>
#include <thread>

#include "absl/status/status.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "common/base/clock.h"
#include "proto/parameter_server.pb.h"
#include "ps_server/shard.h"

namespace psc {
namespace ps_server {

struct ShardServerOptions {
  int task_index = 0;  // this server's ps index in TF_CONFIG
  // The shard's options; shard.clock is required and also times the waits.
  ShardOptions shard;
  // A pull waits at most this long, whatever its call's deadline.
  absl::Duration max_pull_wait = absl::Minutes(10);
  // How often the timer ends the waits whose deadline passed; zero runs no
  // timer (a test then calls ExpireWaiters itself).
  absl::Duration expiry_interval = absl::Milliseconds(20);
};

class ShardServer {
 public:
  using Done = std::function<void(absl::Status)>;

  explicit ShardServer(const ShardServerOptions& options);
  ~ShardServer();  // Stop()

  ShardServer(const ShardServer&) = delete;
  ShardServer& operator=(const ShardServer&) = delete;

  // Shard::Configure, after checking that the request names this server's
  // shard (INVALID_ARGUMENT otherwise).
  absl::Status Configure(const proto::ConfigureRequest& request);
  absl::Status CreateVariables(const proto::CreateVariablesRequest& request,
                               proto::CreateVariablesResponse* response);
  absl::Status UpdateMembership(const proto::UpdateMembershipRequest& request,
                                proto::UpdateMembershipResponse* response);
  absl::Status SaveCheckpoint(const proto::SaveCheckpointRequest& request,
                              proto::SaveCheckpointResponse* response);
  absl::Status RestoreCheckpoint(const proto::RestoreCheckpointRequest& request,
                                 proto::RestoreCheckpointResponse* response);
  absl::Status ExportState(const proto::ExportStateRequest& request,
                           proto::ExportStateResponse* response);
  absl::Status ImportState(const proto::ImportStateRequest& request,
                           proto::ImportStateResponse* response);
  // The shard's counters, with this server's index even before Configure.
  proto::ShardStats Stats() const;

  // Shard::Pull, waiting until `deadline` (the call's; InfiniteFuture for
  // none) but at most max_pull_wait. `done` runs exactly once, maybe before
  // this returns; `response` must stay valid until it runs.
  void Pull(const proto::PullRequest& request, absl::Time deadline, proto::PullResponse* response,
            Done done);
  // Shard::Push; then, with request.pull_after() and a successful push, the
  // variables in the same answer once the shard reaches pull_min_version.
  // Same contract for `deadline`, `done` and `response` as Pull.
  void Push(const proto::PushRequest& request, absl::Time deadline, proto::PushResponse* response,
            Done done);

  // The same, blocking the calling thread (the data channel has a thread per
  // connection).
  absl::Status PullBlocking(const proto::PullRequest& request, absl::Time deadline,
                            proto::PullResponse* response);
  absl::Status PushBlocking(const proto::PushRequest& request, absl::Time deadline,
                            proto::PushResponse* response);
  // Shard::CheckGradientShapes: before a data-channel push's bytes are read.
  absl::Status CheckGradientShapes(const proto::PushRequest& meta) const {
    return shard_.CheckGradientShapes(meta);
  }

  // Ends the waits whose deadline passed (what the timer does).
  void ExpireWaiters() { shard_.ExpireWaiters(); }

  // Fails every waiting pull with UNAVAILABLE, refuses new waits and stops
  // the timer. Idempotent.
  void Stop();

  int task_index() const { return options_.task_index; }
  const Shard& shard() const { return shard_; }
  Shard& shard() { return shard_; }

 private:
  absl::Time WaitUntil(absl::Time deadline) const;

  const ShardServerOptions options_;
  Shard shard_;
  absl::Notification stop_;
  std::thread timer_;
};

}  // namespace ps_server
}  // namespace psc

#endif  // PSC_PS_SERVER_SHARD_SERVER_H_
