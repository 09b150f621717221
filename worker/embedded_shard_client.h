// multi_worker_mirrored keeps each worker's replica of the variables and
// the optimizer state in a parameter-server shard of its own, in the
// worker's process (ps_server::ShardServer, the code the ps tasks run): one
// shard holding every variable, configured for sync with one replica, so a
// step's all-reduced gradient is applied by the same optimizer code, with
// the same exactly-once ledger, checkpoints and moving averages as on a ps.
// The chief reaches the shard through the worker's ParameterServer service
// (to configure, restore, checkpoint, evaluate and hand state to a peer);
// the worker's trainer reaches it through this client, without a socket.
#ifndef PSC_WORKER_EMBEDDED_SHARD_CLIENT_H_
#define PSC_WORKER_EMBEDDED_SHARD_CLIENT_H_

#include <atomic>

#include "common/base/clock.h"
#include "common/ps_client/parameter_client.h"
#include "ps_server/shard_server.h"

namespace psc {
namespace worker {

// Thread-safe.
class EmbeddedShardClient : public ps_client::ParameterClient {
 public:
  // Not owned; they must outlive the client. `clock` sets the deadlines.
  EmbeddedShardClient(ps_server::ShardServer* server, base::Clock* clock)
      : server_(server), clock_(clock) {}

  int num_shards() const override { return 1; }
  absl::Status PushAll(const std::vector<proto::PushRequest>& requests,
                       std::vector<proto::PushResponse>* responses,
                       absl::Duration timeout) override;
  absl::Status PullAll(const std::vector<proto::PullRequest>& requests,
                       std::vector<proto::PullResponse>* responses,
                       absl::Duration timeout) override;
  absl::Status Configure(int shard, const proto::ConfigureRequest& request) override;
  absl::Status CreateVariables(int shard, const proto::CreateVariablesRequest& request) override;
  absl::Status UpdateMembership(int shard, const proto::UpdateMembershipRequest& request,
                                proto::UpdateMembershipResponse* response) override;
  absl::Status SaveCheckpoint(int shard, const proto::SaveCheckpointRequest& request,
                              proto::SaveCheckpointResponse* response) override;
  absl::Status RestoreCheckpoint(int shard, const proto::RestoreCheckpointRequest& request,
                                 proto::RestoreCheckpointResponse* response) override;
  absl::Status ExportState(int shard, const proto::ExportStateRequest& request,
                           proto::ExportStateResponse* response) override;
  absl::Status ImportState(int shard, const proto::ImportStateRequest& request,
                           proto::ImportStateResponse* response) override;
  absl::StatusOr<proto::ShardStats> GetStats(int shard) override;
  // Later calls fail CANCELLED (a local call waits only for its deadline).
  void CancelAll() override { cancelled_ = true; }
  void CancelInFlight() override {}

 private:
  absl::Status Check(int shard, size_t requests = 1) const;

  ps_server::ShardServer* const server_;
  base::Clock* const clock_;
  std::atomic<bool> cancelled_{false};
};

}  // namespace worker
}  // namespace psc

#endif  // PSC_WORKER_EMBEDDED_SHARD_CLIENT_H_
