#include "chief/coordinator_service.h"

#include <utility>

#include "proto/coordinator.pb.h"

namespace psc {
namespace chief {

CoordinatorService::CoordinatorService(TaskRegistry* registry, std::string token)
    : UnaryService("psc.proto.Coordinator", std::move(token)), registry_(registry) {
  using Context = grpc::CallbackServerContext;
  AddMethod<proto::RegisterRequest, proto::RegisterResponse>(
      "Register", [this](Context*, const auto& request, auto* response) {
        auto n = registry_->Register(request.task().type(), request.task().index(),
                                     request.incarnation());
        if (n.ok()) response->set_registered_tasks(*n);
        return n.status();
      });
  AddMethod<proto::HeartbeatRequest, proto::HeartbeatResponse>(
      "Heartbeat", [this](Context*, const auto& request, auto*) {
        return registry_->Heartbeat(request.task().type(), request.task().index(),
                                    request.incarnation());
      });
  AddMethod<proto::ReportRequest, proto::ReportResponse>(
      "Report", [this](Context*, const auto& request, auto*) {
        return registry_->Report(request.task().type(), request.task().index(),
                                 request.incarnation(), request.unit(), request.steps_done(),
                                 request.error());
      });
}

}  // namespace chief
}  // namespace psc
