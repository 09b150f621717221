#include "ps_server/ps_service.h"

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/rpc/daemon.h"
#include "common/rpc/reactor.h"

namespace psc {
namespace ps {
namespace {

grpc::ServerUnaryReactor* NotYet(grpc::CallbackServerContext* context, const char* method) {
  return FinishUnary(context, grpc::Status(grpc::StatusCode::UNIMPLEMENTED,
                                           absl::StrCat("ParameterServer.", method,
                                                        " is not implemented in this build")));
}

}  // namespace

ParameterServerService::ParameterServerService(int shard_index, std::string token,
                                               ShutdownSignal* shutdown)
    : shard_index_(shard_index), auth_(std::move(token)), shutdown_(shutdown) {}

grpc::ServerUnaryReactor* ParameterServerService::Configure(grpc::CallbackServerContext* context,
                                                            const proto::ConfigureRequest*,
                                                            proto::ConfigureResponse*) {
  PSC_AUTHORIZE_UNARY(auth_, context);
  return NotYet(context, "Configure");
}

grpc::ServerUnaryReactor* ParameterServerService::CreateVariables(
    grpc::CallbackServerContext* context, const proto::CreateVariablesRequest*,
    proto::CreateVariablesResponse*) {
  PSC_AUTHORIZE_UNARY(auth_, context);
  return NotYet(context, "CreateVariables");
}

grpc::ServerUnaryReactor* ParameterServerService::Pull(grpc::CallbackServerContext* context,
                                                       const proto::PullRequest*,
                                                       proto::PullResponse*) {
  PSC_AUTHORIZE_UNARY(auth_, context);
  return NotYet(context, "Pull");
}

grpc::ServerUnaryReactor* ParameterServerService::Push(grpc::CallbackServerContext* context,
                                                       const proto::PushRequest*,
                                                       proto::PushResponse*) {
  PSC_AUTHORIZE_UNARY(auth_, context);
  return NotYet(context, "Push");
}

grpc::ServerUnaryReactor* ParameterServerService::UpdateMembership(
    grpc::CallbackServerContext* context, const proto::UpdateMembershipRequest*,
    proto::UpdateMembershipResponse*) {
  PSC_AUTHORIZE_UNARY(auth_, context);
  return NotYet(context, "UpdateMembership");
}

grpc::ServerUnaryReactor* ParameterServerService::SaveCheckpoint(
    grpc::CallbackServerContext* context, const proto::SaveCheckpointRequest*,
    proto::SaveCheckpointResponse*) {
  PSC_AUTHORIZE_UNARY(auth_, context);
  return NotYet(context, "SaveCheckpoint");
}

grpc::ServerUnaryReactor* ParameterServerService::RestoreCheckpoint(
    grpc::CallbackServerContext* context, const proto::RestoreCheckpointRequest*,
    proto::RestoreCheckpointResponse*) {
  PSC_AUTHORIZE_UNARY(auth_, context);
  return NotYet(context, "RestoreCheckpoint");
}

grpc::ServerUnaryReactor* ParameterServerService::GetStats(grpc::CallbackServerContext* context,
                                                           const proto::GetStatsRequest*,
                                                           proto::ShardStats* response) {
  PSC_AUTHORIZE_UNARY(auth_, context);
  // No variables exist before the shard store lands: every counter is zero.
  response->set_shard_index(shard_index_);
  return FinishUnary(context, grpc::Status::OK);
}

grpc::ServerUnaryReactor* ParameterServerService::Shutdown(grpc::CallbackServerContext* context,
                                                           const proto::ShutdownRequest* request,
                                                           proto::ShutdownResponse*) {
  PSC_AUTHORIZE_UNARY(auth_, context);
  shutdown_->Request(ShutdownRpcReason(context->peer(), request->reason()));
  return FinishUnary(context, grpc::Status::OK);
}

}  // namespace ps
}  // namespace psc
