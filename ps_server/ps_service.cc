#include "ps_server/ps_service.h"

#include "common/daemon/daemon.h"
#include "common/rpc/reactor.h"

namespace psc {
namespace ps_server {
namespace {

// The call's deadline; gRPC's "none" is the far future.
absl::Time CallDeadline(const grpc::CallbackServerContext& context) {
  return absl::FromChrono(context.deadline());
}

// Finishes `reactor` from the shard's callback.
ShardServer::Done Finisher(grpc::ServerUnaryReactor* reactor) {
  return [reactor](absl::Status s) { reactor->Finish(rpc::ToGrpcStatus(s)); };
}

}  // namespace

ParameterServerService::ParameterServerService(ShardServer* server, std::string token,
                                               base::ShutdownSignal* shutdown)
    : server_(server), auth_(std::move(token)), shutdown_(shutdown) {}

grpc::ServerUnaryReactor* ParameterServerService::Configure(grpc::CallbackServerContext* context,
                                                            const proto::ConfigureRequest* request,
                                                            proto::ConfigureResponse*) {
  PSC_AUTHORIZE_UNARY(auth_, context);
  return rpc::FinishUnary(context, server_->Configure(*request));
}

grpc::ServerUnaryReactor* ParameterServerService::CreateVariables(
    grpc::CallbackServerContext* context, const proto::CreateVariablesRequest* request,
    proto::CreateVariablesResponse* response) {
  PSC_AUTHORIZE_UNARY(auth_, context);
  return rpc::FinishUnary(context, server_->CreateVariables(*request, response));
}

grpc::ServerUnaryReactor* ParameterServerService::Pull(grpc::CallbackServerContext* context,
                                                       const proto::PullRequest* request,
                                                       proto::PullResponse* response) {
  PSC_AUTHORIZE_UNARY(auth_, context);
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  server_->Pull(*request, CallDeadline(*context), response, Finisher(reactor));
  return reactor;
}

grpc::ServerUnaryReactor* ParameterServerService::Push(grpc::CallbackServerContext* context,
                                                       const proto::PushRequest* request,
                                                       proto::PushResponse* response) {
  PSC_AUTHORIZE_UNARY(auth_, context);
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  server_->Push(*request, CallDeadline(*context), response, Finisher(reactor));
  return reactor;
}

grpc::ServerUnaryReactor* ParameterServerService::UpdateMembership(
    grpc::CallbackServerContext* context, const proto::UpdateMembershipRequest* request,
    proto::UpdateMembershipResponse* response) {
  PSC_AUTHORIZE_UNARY(auth_, context);
  return rpc::FinishUnary(context, server_->UpdateMembership(*request, response));
}

grpc::ServerUnaryReactor* ParameterServerService::SaveCheckpoint(
    grpc::CallbackServerContext* context, const proto::SaveCheckpointRequest* request,
    proto::SaveCheckpointResponse* response) {
  PSC_AUTHORIZE_UNARY(auth_, context);
  return rpc::FinishUnary(context, server_->SaveCheckpoint(*request, response));
}

grpc::ServerUnaryReactor* ParameterServerService::RestoreCheckpoint(
    grpc::CallbackServerContext* context, const proto::RestoreCheckpointRequest* request,
    proto::RestoreCheckpointResponse* response) {
  PSC_AUTHORIZE_UNARY(auth_, context);
  return rpc::FinishUnary(context, server_->RestoreCheckpoint(*request, response));
}

grpc::ServerUnaryReactor* ParameterServerService::GetStats(grpc::CallbackServerContext* context,
                                                           const proto::GetStatsRequest*,
                                                           proto::ShardStats* response) {
  PSC_AUTHORIZE_UNARY(auth_, context);
  *response = server_->Stats();
  return rpc::FinishUnary(context, grpc::Status::OK);
}

grpc::ServerUnaryReactor* ParameterServerService::OpenDataChannel(
    grpc::CallbackServerContext* context, const proto::OpenDataChannelRequest*,
    proto::OpenDataChannelResponse* response) {
  PSC_AUTHORIZE_UNARY(auth_, context);
  if (data_server_ == nullptr) {
    return rpc::FinishUnary(context,
                            absl::FailedPreconditionError(
                                "this server has no data channel (--data_channel=false, or TLS)"));
  }
  auto ticket = data_server_->IssueTicket();
  if (!ticket.ok()) return rpc::FinishUnary(context, ticket.status());
  response->set_port(data_server_->port());
  response->set_ticket(*ticket);
  return rpc::FinishUnary(context, grpc::Status::OK);
}

grpc::ServerUnaryReactor* ParameterServerService::Shutdown(grpc::CallbackServerContext* context,
                                                           const proto::ShutdownRequest* request,
                                                           proto::ShutdownResponse*) {
  PSC_AUTHORIZE_UNARY(auth_, context);
  shutdown_->Request(daemon::ShutdownRpcReason(context->peer(), request->reason()));
  return rpc::FinishUnary(context, grpc::Status::OK);
}

}  // namespace ps_server
}  // namespace psc
