// How workers and the chief talk to the parameter-server shards, without
// naming a transport. The one implementation is ParameterServerClient
// (parameter_server_client.h): over gRPC and the data channel in the daemons
// (rpc::GrpcParameterClient), over in-process ShardServers in the tests.
#ifndef PSC_COMMON_PS_CLIENT_PARAMETER_CLIENT_H_
#define PSC_COMMON_PS_CLIENT_PARAMETER_CLIENT_H_

#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "proto/parameter_server.pb.h"

namespace psc {
namespace ps_client {

// Implementations are thread-safe.
class ParameterClient {
 public:
  virtual ~ParameterClient() = default;
  virtual int num_shards() const = 0;

  // One request per shard (requests.size() == num_shards()), sent
  // concurrently; returns when every shard answered. The first error wins.
  // A retried push is safe: shards apply each PushId at most once.
  virtual absl::Status PushAll(const std::vector<proto::PushRequest>& requests,
                               std::vector<proto::PushResponse>* responses,
                               absl::Duration timeout) = 0;
  virtual absl::Status PullAll(const std::vector<proto::PullRequest>& requests,
                               std::vector<proto::PullResponse>* responses,
                               absl::Duration timeout) = 0;
  // One push to one shard (a part of a push in parts: part_pusher.h), with
  // PushAll's retries. UNIMPLEMENTED by clients that only take whole steps.
  virtual absl::Status Push(int shard, const proto::PushRequest& request,
                            proto::PushResponse* response, absl::Duration timeout) {
    return absl::UnimplementedError("this parameter client takes whole pushes only (no --overlap)");
  }
  // One pull from one shard (a part of a pull in parts: part_pusher.h), with
  // PullAll's retries. UNIMPLEMENTED as Push.
  virtual absl::Status Pull(int shard, const proto::PullRequest& request,
                            proto::PullResponse* response, absl::Duration timeout) {
    return absl::UnimplementedError("this parameter client takes whole pulls only (no --overlap)");
  }

  // The chief's calls, one shard at a time.
  virtual absl::Status Configure(int shard, const proto::ConfigureRequest& request) = 0;
  virtual absl::Status CreateVariables(int shard, const proto::CreateVariablesRequest& request) = 0;
  virtual absl::Status UpdateMembership(int shard, const proto::UpdateMembershipRequest& request,
                                        proto::UpdateMembershipResponse* response) = 0;
  virtual absl::Status SaveCheckpoint(int shard, const proto::SaveCheckpointRequest& request,
                                      proto::SaveCheckpointResponse* response) = 0;
  virtual absl::Status RestoreCheckpoint(int shard, const proto::RestoreCheckpointRequest& request,
                                         proto::RestoreCheckpointResponse* response) = 0;
  // The shard's whole state as SaveCheckpoint would write it, carried in the
  // answer instead of a file, and its replacement by such a state (verified
  // as a restore is; all or nothing): how a one-shard server that fell
  // behind or joined late takes a peer's state.
  virtual absl::Status ExportState(int shard, const proto::ExportStateRequest& request,
                                   proto::ExportStateResponse* response) = 0;
  virtual absl::Status ImportState(int shard, const proto::ImportStateRequest& request,
                                   proto::ImportStateResponse* response) = 0;
  virtual absl::StatusOr<proto::ShardStats> GetStats(int shard) = 0;

  // Cancels every call in flight and fails every later one with CANCELLED.
  virtual void CancelAll() = 0;

  // Ends every call in flight now (CANCELLED, not retried); calls that start
  // later run normally. What a worker uses to end a unit nobody waits for.
  virtual void CancelInFlight() = 0;
};

}  // namespace ps_client
}  // namespace psc

#endif  // PSC_COMMON_PS_CLIENT_PARAMETER_CLIENT_H_
