#include "common/rpc/grpc_shard_transport.h"

#include "common/rpc/channel.h"
#include "common/rpc/grpc_status.h"

namespace psc {
namespace rpc {

GrpcShardTransport::GrpcShardTransport(const std::string& address, const SecurityOptions& security)
    : security_(security),
      stub_(proto::ParameterServer::NewStub(CreateChannel(address, security))) {}

template <typename Rpc>
absl::Status GrpcShardTransport::Call(const ps_client::Attempt& attempt, Rpc rpc) {
  grpc::ClientContext context;
  PrepareContext(&context, security_, attempt.timeout);
  context.set_wait_for_ready(true);
  ps_client::CancelScope scope(attempt, [&context] { context.TryCancel(); });
  if (!scope.ok()) return absl::CancelledError("cancelled");
  return FromGrpcStatus(rpc(&context));
}

absl::Status GrpcShardTransport::Push(const proto::PushRequest& request,
                                      proto::PushResponse* response,
                                      const ps_client::Attempt& attempt) {
  return Call(attempt, [&](grpc::ClientContext* c) { return stub_->Push(c, request, response); });
}

absl::Status GrpcShardTransport::Pull(const proto::PullRequest& request,
                                      proto::PullResponse* response,
                                      const ps_client::Attempt& attempt) {
  return Call(attempt, [&](grpc::ClientContext* c) { return stub_->Pull(c, request, response); });
}

absl::Status GrpcShardTransport::Configure(const proto::ConfigureRequest& request,
                                           const ps_client::Attempt& attempt) {
  proto::ConfigureResponse response;
  return Call(attempt,
              [&](grpc::ClientContext* c) { return stub_->Configure(c, request, &response); });
}

absl::Status GrpcShardTransport::CreateVariables(const proto::CreateVariablesRequest& request,
                                                 const ps_client::Attempt& attempt) {
  proto::CreateVariablesResponse response;
  return Call(attempt, [&](grpc::ClientContext* c) {
    return stub_->CreateVariables(c, request, &response);
  });
}

absl::Status GrpcShardTransport::UpdateMembership(const proto::UpdateMembershipRequest& request,
                                                  proto::UpdateMembershipResponse* response,
                                                  const ps_client::Attempt& attempt) {
  return Call(attempt, [&](grpc::ClientContext* c) {
    return stub_->UpdateMembership(c, request, response);
  });
}

absl::Status GrpcShardTransport::SaveCheckpoint(const proto::SaveCheckpointRequest& request,
                                                proto::SaveCheckpointResponse* response,
                                                const ps_client::Attempt& attempt) {
  return Call(attempt,
              [&](grpc::ClientContext* c) { return stub_->SaveCheckpoint(c, request, response); });
}

absl::Status GrpcShardTransport::RestoreCheckpoint(const proto::RestoreCheckpointRequest& request,
                                                   proto::RestoreCheckpointResponse* response,
                                                   const ps_client::Attempt& attempt) {
  return Call(attempt, [&](grpc::ClientContext* c) {
    return stub_->RestoreCheckpoint(c, request, response);
  });
}

absl::Status GrpcShardTransport::ExportState(const proto::ExportStateRequest& request,
                                             proto::ExportStateResponse* response,
                                             const ps_client::Attempt& attempt) {
  return Call(attempt,
              [&](grpc::ClientContext* c) { return stub_->ExportState(c, request, response); });
}

absl::Status GrpcShardTransport::ImportState(const proto::ImportStateRequest& request,
                                             proto::ImportStateResponse* response,
                                             const ps_client::Attempt& attempt) {
  return Call(attempt,
              [&](grpc::ClientContext* c) { return stub_->ImportState(c, request, response); });
}

absl::Status GrpcShardTransport::GetStats(proto::ShardStats* response,
                                          const ps_client::Attempt& attempt) {
  return Call(attempt, [&](grpc::ClientContext* c) {
    return stub_->GetStats(c, proto::GetStatsRequest(), response);
  });
}

absl::Status GrpcShardTransport::OpenDataChannel(proto::OpenDataChannelResponse* response,
                                                 const ps_client::Attempt& attempt) {
  return Call(attempt, [&](grpc::ClientContext* c) {
    return stub_->OpenDataChannel(c, proto::OpenDataChannelRequest(), response);
  });
}

}  // namespace rpc
}  // namespace psc
