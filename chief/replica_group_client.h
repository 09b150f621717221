// multi_worker_mirrored has no ps: every worker holds a full replica of the
// variables and the optimizer state in a shard embedded in its process
// (worker/embedded_shard_client.h), all bit-identical after every step.
// The chief sees them as the one shard of a ParameterClient, so the job
// runner configures, initializes, restores, checkpoints and evaluates as in
// the ps strategy:
//   - Configure, CreateVariables, RestoreCheckpoint go to every live
//     worker's replica (each configured as a sync shard of one replica);
//   - SaveCheckpoint, pulls and GetStats go to the first live worker that
//     answers: one worker writes the checkpoint, in the ps format;
//   - UpdateMembership is answered here, without a call: each replica
//     applies one gradient per step, the group's sum, so it never holds a
//     partial step, and membership changes nothing in it.
// Per worker, replica(w) reaches one replica (the regroup compares their
// steps and hands a peer's state to a worker behind or joining).
#ifndef PSC_CHIEF_REPLICA_GROUP_CLIENT_H_
#define PSC_CHIEF_REPLICA_GROUP_CLIENT_H_

#include <functional>
#include <optional>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/ps_client/parameter_client.h"

namespace psc {
namespace chief {

// Thread-safe.
class ReplicaGroupClient : public ps_client::ParameterClient {
 public:
  // replicas[w] reaches worker w's replica (one shard); not owned.
  explicit ReplicaGroupClient(std::vector<ps_client::ParameterClient*> replicas);

  // Which workers are live (ascending); until set, all of them.
  void SetLive(std::function<std::vector<int>()> live) ABSL_LOCKS_EXCLUDED(mu_);
  int num_workers() const { return static_cast<int>(replicas_.size()); }
  ps_client::ParameterClient* replica(int worker) { return replicas_[worker]; }
  // Configures worker w's replica as the last Configure did the others
  // (a worker joining). FAILED_PRECONDITION before any Configure.
  absl::Status ConfigureReplica(int worker) ABSL_LOCKS_EXCLUDED(mu_);

  int num_shards() const override { return 1; }
  // The chief pushes nothing: UNIMPLEMENTED.
  absl::Status PushAll(const std::vector<proto::PushRequest>& requests,
                       std::vector<proto::PushResponse>* responses,
                       absl::Duration timeout) override;
  absl::Status PullAll(const std::vector<proto::PullRequest>& requests,
                       std::vector<proto::PullResponse>* responses,
                       absl::Duration timeout) override;
  absl::Status Configure(int shard, const proto::ConfigureRequest& request) override
      ABSL_LOCKS_EXCLUDED(mu_);
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
  void CancelAll() override;
  void CancelInFlight() override;

 private:
  std::vector<int> Live() const ABSL_LOCKS_EXCLUDED(mu_);
  // `call` on every live replica; the first error, naming the worker.
  absl::Status OnEvery(const std::function<absl::Status(ps_client::ParameterClient*)>& call);
  // `call` on the live replicas in order until one succeeds.
  absl::Status OnFirst(const std::function<absl::Status(ps_client::ParameterClient*)>& call);

  const std::vector<ps_client::ParameterClient*> replicas_;
  mutable absl::Mutex mu_;
  std::function<std::vector<int>()> live_ ABSL_GUARDED_BY(mu_);
  std::optional<proto::ConfigureRequest> configure_ ABSL_GUARDED_BY(mu_);
};

}  // namespace chief
}  // namespace psc

#endif  // PSC_CHIEF_REPLICA_GROUP_CLIENT_H_
