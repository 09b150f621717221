#include "worker/worker_service.h"

#include "absl/strings/str_cat.h"
#include "common/rpc/daemon.h"
#include "common/rpc/reactor.h"

namespace psc {
namespace worker {
WorkerService::WorkerService(int task_index, std::vector<proto::DeviceInfo> devices,
                             std::string token, ShutdownSignal* shutdown)
    : task_index_(task_index),
      devices_(std::move(devices)),
      auth_(std::move(token)),
      shutdown_(shutdown) {}

grpc::ServerUnaryReactor* WorkerService::StartJob(grpc::CallbackServerContext* context,
                                                  const proto::StartJobRequest*,
                                                  proto::StartJobResponse*) {
  PSC_AUTHORIZE_UNARY(auth_, context);
  return FinishUnary(context, grpc::Status(grpc::StatusCode::UNIMPLEMENTED,
                                           "Worker.StartJob is not implemented in this build"));
}

grpc::ServerUnaryReactor* WorkerService::RunUnit(grpc::CallbackServerContext* context,
                                                 const proto::RunUnitRequest*,
                                                 proto::RunUnitResponse*) {
  PSC_AUTHORIZE_UNARY(auth_, context);
  return FinishUnary(context, grpc::Status(grpc::StatusCode::UNIMPLEMENTED,
                                           "Worker.RunUnit is not implemented in this build"));
}

grpc::ServerUnaryReactor* WorkerService::GetStatus(grpc::CallbackServerContext* context,
                                                   const proto::GetStatusRequest*,
                                                   proto::WorkerStatus* response) {
  PSC_AUTHORIZE_UNARY(auth_, context);
  response->set_task_index(task_index_);
  response->set_state(shutdown_->requested() ? proto::WorkerStatus::STOPPING
                                             : proto::WorkerStatus::IDLE);
  for (const proto::DeviceInfo& d : devices_) *response->add_devices() = d;
  return FinishUnary(context, grpc::Status::OK);
}

grpc::ServerUnaryReactor* WorkerService::Shutdown(grpc::CallbackServerContext* context,
                                                  const proto::ShutdownRequest* request,
                                                  proto::ShutdownResponse*) {
  PSC_AUTHORIZE_UNARY(auth_, context);
  shutdown_->Request(ShutdownRpcReason(context->peer(), request->reason()));
  return FinishUnary(context, grpc::Status::OK);
}

}  // namespace worker
}  // namespace psc
