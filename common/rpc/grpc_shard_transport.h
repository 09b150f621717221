// A ShardTransport over gRPC: each call is one RPC of the ParameterServer
// service, with the cluster token, the attempt's timeout and wait_for_ready
// (an attempt rides out a reconnect instead of failing at once), cancelled
// through the attempt's CancelScope.
#ifndef PSC_COMMON_RPC_GRPC_SHARD_TRANSPORT_H_
#define PSC_COMMON_RPC_GRPC_SHARD_TRANSPORT_H_

#include <memory>
#include <string>

#include "common/ps_client/shard_transport.h"
#include "common/rpc/security.h"
#include "proto/parameter_server.grpc.pb.h"

namespace psc {
namespace rpc {

// Thread-safe.
class GrpcShardTransport : public ps_client::ShardTransport {
 public:
  GrpcShardTransport(const std::string& address, const SecurityOptions& security);

  absl::Status Push(const proto::PushRequest& request, proto::PushResponse* response,
                    const ps_client::Attempt& attempt) override;
  absl::Status Pull(const proto::PullRequest& request, proto::PullResponse* response,
                    const ps_client::Attempt& attempt) override;
  absl::Status Configure(const proto::ConfigureRequest& request,
                         const ps_client::Attempt& attempt) override;
  absl::Status CreateVariables(const proto::CreateVariablesRequest& request,
                               const ps_client::Attempt& attempt) override;
  absl::Status UpdateMembership(const proto::UpdateMembershipRequest& request,
                                proto::UpdateMembershipResponse* response,
                                const ps_client::Attempt& attempt) override;
  absl::Status SaveCheckpoint(const proto::SaveCheckpointRequest& request,
                              proto::SaveCheckpointResponse* response,
                              const ps_client::Attempt& attempt) override;
  absl::Status RestoreCheckpoint(const proto::RestoreCheckpointRequest& request,
                                 proto::RestoreCheckpointResponse* response,
                                 const ps_client::Attempt& attempt) override;
  absl::Status ExportState(const proto::ExportStateRequest& request,
                           proto::ExportStateResponse* response,
                           const ps_client::Attempt& attempt) override;
  absl::Status ImportState(const proto::ImportStateRequest& request,
                           proto::ImportStateResponse* response,
                           const ps_client::Attempt& attempt) override;
  absl::Status GetStats(proto::ShardStats* response, const ps_client::Attempt& attempt) override;
  absl::Status OpenDataChannel(proto::OpenDataChannelResponse* response,
                               const ps_client::Attempt& attempt) override;

 private:
  // One RPC: `rpc(context)` on a context prepared for `attempt`.
  template <typename Rpc>
  absl::Status Call(const ps_client::Attempt& attempt, Rpc rpc);

  const SecurityOptions security_;
  const std::unique_ptr<proto::ParameterServer::Stub> stub_;
};

}  // namespace rpc
}  // namespace psc

#endif  // PSC_COMMON_RPC_GRPC_SHARD_TRANSPORT_H_
