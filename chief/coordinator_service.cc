#include "chief/coordinator_service.h"

#include "common/rpc/reactor.h"

namespace psc {
namespace chief {
grpc::ServerUnaryReactor* CoordinatorService::Register(grpc::CallbackServerContext* context,
                                                       const proto::RegisterRequest* request,
                                                       proto::RegisterResponse* response) {
  PSC_AUTHORIZE_UNARY(auth_, context);
  auto n =
      registry_->Register(request->task().type(), request->task().index(), request->incarnation());
  if (n.ok()) response->set_registered_tasks(*n);
  return rpc::FinishUnary(context, n.status());
}

grpc::ServerUnaryReactor* CoordinatorService::Heartbeat(grpc::CallbackServerContext* context,
                                                        const proto::HeartbeatRequest* request,
                                                        proto::HeartbeatResponse*) {
  PSC_AUTHORIZE_UNARY(auth_, context);
  return rpc::FinishUnary(context,
                          registry_->Heartbeat(request->task().type(), request->task().index(),
                                               request->incarnation()));
}

grpc::ServerUnaryReactor* CoordinatorService::Report(grpc::CallbackServerContext* context,
                                                     const proto::ReportRequest* request,
                                                     proto::ReportResponse*) {
  PSC_AUTHORIZE_UNARY(auth_, context);
  return rpc::FinishUnary(
      context,
      registry_->Report(request->task().type(), request->task().index(), request->incarnation(),
                        request->unit(), request->steps_done(), request->error()));
}

}  // namespace chief
}  // namespace psc
