#include "chief/coordinator_service.h"

#include <algorithm>
#include <utility>

#include "proto/coordinator.pb.h"

namespace psc {
namespace chief {
namespace {

absl::Status NoStore() {
  return absl::FailedPreconditionError(
      "this coordinator serves no collective store (the job's strategy is not "
      "multi_worker_mirrored)");
}

}  // namespace

CoordinatorService::CoordinatorService(TaskRegistry* registry, std::string token,
                                       collective::MemoryStore* store)
    : UnaryService("psc.proto.Coordinator", std::move(token)), registry_(registry), store_(store) {
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
  AddMethod<proto::ReportEvaluationRequest, proto::ReportEvaluationResponse>(
      "ReportEvaluation", [this](Context*, const auto& request, auto*) {
        return registry_->RecordEvaluation(request.task().type(), request.task().index(),
                                           request.step());
      });
  AddMethod<proto::JoinRequest, proto::JoinResponse>(
      "Join", [this](Context*, const auto& request, auto* response) {
        absl::StatusOr<int> index =
            registry_->Join(request.address(), request.preferred_index(), request.incarnation());
        if (!index.ok()) return index.status();
        response->set_index(*index);
        response->set_cluster_json(registry_->cluster().ClusterJson());
        return absl::OkStatus();
      });
  AddMethod<proto::LeaveRequest, proto::LeaveResponse>(
      "Leave", [this](Context*, const auto& request, auto* response) {
        absl::StatusOr<bool> drained =
            registry_->Leave(request.task().type(), request.task().index(), request.incarnation());
        if (!drained.ok()) return drained.status();
        response->set_drained(*drained);
        return absl::OkStatus();
      });
  AddMethod<proto::StoreSetRequest, proto::StoreSetResponse>(
      "StoreSet", [this](Context*, const auto& request, auto*) {
        if (store_ == nullptr) return NoStore();
        return store_->Set(request.key(), request.value());
      });
  AddMethod<proto::StoreGetRequest, proto::StoreGetResponse>(
      "StoreGet", [this](Context*, const auto& request, auto* response) {
        if (store_ == nullptr) return NoStore();
        if (request.wait_ms() < 0) {
          return absl::InvalidArgumentError("StoreGet wait_ms must not be negative");
        }
        const absl::Duration wait = std::min(absl::Milliseconds(request.wait_ms()), kMaxStoreWait);
        absl::StatusOr<std::string> value = store_->Get(request.key(), wait);
        if (!value.ok()) return value.status();
        response->set_value(*std::move(value));
        return absl::OkStatus();
      });
}

}  // namespace chief
}  // namespace psc
