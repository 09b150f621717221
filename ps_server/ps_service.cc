#include "ps_server/ps_service.h"

#include "common/daemon/daemon.h"

namespace psc {
namespace ps_server {

ParameterServerService::ParameterServerService(ShardServer* server, std::string token,
                                               base::ShutdownSignal* shutdown)
    : UnaryService("psc.proto.ParameterServer", std::move(token)),
      server_(server),
      shutdown_(shutdown) {
  using Context = grpc::CallbackServerContext;
  // The call's deadline; gRPC's "none" is the far future.
  auto deadline = [](const Context* c) { return absl::FromChrono(c->deadline()); };
  AddMethod<proto::ConfigureRequest, proto::ConfigureResponse>(
      "Configure",
      [this](Context*, const auto& request, auto*) { return server_->Configure(request); });
  AddMethod<proto::CreateVariablesRequest, proto::CreateVariablesResponse>(
      "CreateVariables", [this](Context*, const auto& request, auto* response) {
        return server_->CreateVariables(request, response);
      });
  AddAsyncMethod<proto::PullRequest, proto::PullResponse>(
      "Pull", [this, deadline](Context* c, const auto& request, auto* response, rpc::Done done) {
        server_->Pull(request, deadline(c), response, std::move(done));
      });
  AddAsyncMethod<proto::PushRequest, proto::PushResponse>(
      "Push", [this, deadline](Context* c, const auto& request, auto* response, rpc::Done done) {
        server_->Push(request, deadline(c), response, std::move(done));
      });
  AddMethod<proto::UpdateMembershipRequest, proto::UpdateMembershipResponse>(
      "UpdateMembership", [this](Context*, const auto& request, auto* response) {
        return server_->UpdateMembership(request, response);
      });
  AddMethod<proto::SaveCheckpointRequest, proto::SaveCheckpointResponse>(
      "SaveCheckpoint", [this](Context*, const auto& request, auto* response) {
        return server_->SaveCheckpoint(request, response);
      });
  AddMethod<proto::RestoreCheckpointRequest, proto::RestoreCheckpointResponse>(
      "RestoreCheckpoint", [this](Context*, const auto& request, auto* response) {
        return server_->RestoreCheckpoint(request, response);
      });
  AddMethod<proto::ExportStateRequest, proto::ExportStateResponse>(
      "ExportState", [this](Context*, const auto& request, auto* response) {
        return server_->ExportState(request, response);
      });
  AddMethod<proto::ImportStateRequest, proto::ImportStateResponse>(
      "ImportState", [this](Context*, const auto& request, auto* response) {
        return server_->ImportState(request, response);
      });
  AddMethod<proto::GetStatsRequest, proto::ShardStats>(
      "GetStats", [this](Context*, const auto&, auto* response) {
        *response = server_->Stats();
        return absl::OkStatus();
      });
  AddMethod<proto::OpenDataChannelRequest, proto::OpenDataChannelResponse>(
      "OpenDataChannel",
      [this](Context*, const auto&, auto* response) { return OpenDataChannel(response); });
  AddMethod<proto::ShutdownRequest, proto::ShutdownResponse>(
      "Shutdown", [this](Context* c, const auto& request, auto*) {
        shutdown_->Request(daemon::ShutdownRpcReason(c->peer(), request.reason()));
        return absl::OkStatus();
      });
}

absl::Status ParameterServerService::OpenDataChannel(proto::OpenDataChannelResponse* response) {
  if (data_server_ == nullptr) {
    return absl::FailedPreconditionError("this server has no data channel (--data_channel=false)");
  }
  auto ticket = data_server_->IssueTicket();
  if (!ticket.ok()) return ticket.status();
  response->set_port(data_server_->port());
  response->set_ticket(*ticket);
  response->set_tls(data_server_->tls());
  return absl::OkStatus();
}

}  // namespace ps_server
}  // namespace psc
