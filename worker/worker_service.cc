#include "worker/worker_service.h"

#include "common/daemon/daemon.h"
#include "common/rpc/grpc_status.h"
#include "common/rpc/reactor.h"

namespace psc {
namespace worker {

grpc::ServerUnaryReactor* WorkerService::StartJob(grpc::CallbackServerContext* context,
                                                  const proto::StartJobRequest* request,
                                                  proto::StartJobResponse* response) {
  PSC_AUTHORIZE_UNARY(auth_, context);
  absl::Status s = core_->StartJob(request->job());
  if (s.ok()) {
    for (const auto& d : core_->devices()) *response->add_devices() = d;
  }
  return rpc::FinishUnary(context, s);
}

grpc::ServerUnaryReactor* WorkerService::RunUnit(grpc::CallbackServerContext* context,
                                                 const proto::RunUnitRequest* request,
                                                 proto::RunUnitResponse* response) {
  PSC_AUTHORIZE_UNARY(auth_, context);
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  const int64_t steps = request->num_steps();
  core_->RunUnit(*request, [reactor, response, steps](absl::StatusOr<proto::UnitMetrics> m) {
    if (m.ok()) {
      response->set_steps_done(steps);
      *response->mutable_metrics() = *std::move(m);
    }
    reactor->Finish(rpc::ToGrpcStatus(m.status()));
  });
  return reactor;
}

grpc::ServerUnaryReactor* WorkerService::GetStatus(grpc::CallbackServerContext* context,
                                                   const proto::GetStatusRequest*,
                                                   proto::WorkerStatus* response) {
  PSC_AUTHORIZE_UNARY(auth_, context);
  *response = core_->Status(shutdown_->requested());
  return rpc::FinishUnary(context, grpc::Status::OK);
}

grpc::ServerUnaryReactor* WorkerService::Shutdown(grpc::CallbackServerContext* context,
                                                  const proto::ShutdownRequest* request,
                                                  proto::ShutdownResponse*) {
  PSC_AUTHORIZE_UNARY(auth_, context);
  shutdown_->Request(daemon::ShutdownRpcReason(context->peer(), request->reason()));
  return rpc::FinishUnary(context, grpc::Status::OK);
}

}  // namespace worker
}  // namespace psc
