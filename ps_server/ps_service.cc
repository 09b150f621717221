#include "ps_server/ps_service.h"

#include <memory>

#include "absl/strings/str_cat.h"
#include "common/daemon/daemon.h"
#include "common/rpc/reactor.h"
#include "ps_server/shard_calls.h"

namespace psc {
namespace ps_server {

ParameterServerService::ParameterServerService(int task_index, Shard* shard, std::string token,
                                               base::ShutdownSignal* shutdown,
                                               absl::Duration max_pull_wait)
    : task_index_(task_index),
      shard_(shard),
      auth_(std::move(token)),
      shutdown_(shutdown),
      max_pull_wait_(max_pull_wait) {
  // Expire waiting pulls at their deadlines (20 ms resolution).
  expirer_ = std::thread([this] {
    while (!stop_.WaitForNotificationWithTimeout(absl::Milliseconds(20))) shard_->ExpireWaiters();
  });
}

ParameterServerService::~ParameterServerService() { StopWaiting(); }

void ParameterServerService::StopWaiting() {
  if (!stop_.HasBeenNotified()) stop_.Notify();
  if (expirer_.joinable()) expirer_.join();
  shard_->Shutdown();
}

absl::Time ParameterServerService::PullDeadline(const grpc::CallbackServerContext& context) const {
  const absl::Time cap = absl::Now() + max_pull_wait_;
  const absl::Time call = absl::FromChrono(context.deadline());
  return std::min(cap, call);
}

grpc::ServerUnaryReactor* ParameterServerService::Configure(grpc::CallbackServerContext* context,
                                                            const proto::ConfigureRequest* request,
                                                            proto::ConfigureResponse*) {
  PSC_AUTHORIZE_UNARY(auth_, context);
  if (request->shard_index() != task_index_) {
    return rpc::FinishUnary(context, absl::InvalidArgumentError(absl::StrCat(
                                         "this server is ps:", task_index_,
                                         "; Configure names shard ", request->shard_index())));
  }
  return rpc::FinishUnary(context, shard_->Configure(*request));
}

grpc::ServerUnaryReactor* ParameterServerService::CreateVariables(
    grpc::CallbackServerContext* context, const proto::CreateVariablesRequest* request,
    proto::CreateVariablesResponse* response) {
  PSC_AUTHORIZE_UNARY(auth_, context);
  return rpc::FinishUnary(context, shard_->CreateVariables(*request, response));
}

grpc::ServerUnaryReactor* ParameterServerService::Pull(grpc::CallbackServerContext* context,
                                                       const proto::PullRequest* request,
                                                       proto::PullResponse* response) {
  PSC_AUTHORIZE_UNARY(auth_, context);
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  shard_->Pull(*request, PullDeadline(*context), response,
               [reactor](absl::Status s) { reactor->Finish(rpc::ToGrpcStatus(s)); });
  return reactor;
}

grpc::ServerUnaryReactor* ParameterServerService::Push(grpc::CallbackServerContext* context,
                                                       const proto::PushRequest* request,
                                                       proto::PushResponse* response) {
  PSC_AUTHORIZE_UNARY(auth_, context);
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  PushThenPull(shard_, *request, PullDeadline(*context), response,
               [reactor](absl::Status s) { reactor->Finish(rpc::ToGrpcStatus(s)); });
  return reactor;
}

grpc::ServerUnaryReactor* ParameterServerService::UpdateMembership(
    grpc::CallbackServerContext* context, const proto::UpdateMembershipRequest* request,
    proto::UpdateMembershipResponse* response) {
  PSC_AUTHORIZE_UNARY(auth_, context);
  return rpc::FinishUnary(context, shard_->UpdateMembership(*request, response));
}

grpc::ServerUnaryReactor* ParameterServerService::SaveCheckpoint(
    grpc::CallbackServerContext* context, const proto::SaveCheckpointRequest* request,
    proto::SaveCheckpointResponse* response) {
  PSC_AUTHORIZE_UNARY(auth_, context);
  return rpc::FinishUnary(context, shard_->SaveCheckpoint(*request, response));
}

grpc::ServerUnaryReactor* ParameterServerService::RestoreCheckpoint(
    grpc::CallbackServerContext* context, const proto::RestoreCheckpointRequest* request,
    proto::RestoreCheckpointResponse* response) {
  PSC_AUTHORIZE_UNARY(auth_, context);
  return rpc::FinishUnary(context, shard_->RestoreCheckpoint(*request, response));
}

grpc::ServerUnaryReactor* ParameterServerService::GetStats(grpc::CallbackServerContext* context,
                                                           const proto::GetStatsRequest*,
                                                           proto::ShardStats* response) {
  PSC_AUTHORIZE_UNARY(auth_, context);
  *response = shard_->Stats();
  response->set_shard_index(task_index_);
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
