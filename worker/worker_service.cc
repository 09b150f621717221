#include "worker/worker_service.h"

#include <utility>

#include "common/daemon/daemon.h"

namespace psc {
namespace worker {

WorkerService::WorkerService(WorkerCore* core, std::string token, base::ShutdownSignal* shutdown)
    : UnaryService("psc.proto.Worker", std::move(token)), core_(core), shutdown_(shutdown) {
  using Context = grpc::CallbackServerContext;
  AddMethod<proto::StartJobRequest, proto::StartJobResponse>(
      "StartJob", [this](Context*, const auto& request, auto* response) {
        absl::Status s = core_->StartJob(request.job());
        if (s.ok()) {
          for (const auto& d : core_->devices()) *response->add_devices() = d;
        }
        return s;
      });
  AddAsyncMethod<proto::RunUnitRequest, proto::RunUnitResponse>(
      "RunUnit", [this](Context*, const auto& request, auto* response, rpc::Done done) {
        const int64_t steps = request.num_steps();
        core_->RunUnit(request, [response, steps,
                                 done = std::move(done)](absl::StatusOr<proto::UnitMetrics> m) {
          if (m.ok()) {
            response->set_steps_done(steps);
            *response->mutable_metrics() = *std::move(m);
          }
          done(m.status());
        });
      });
  AddMethod<proto::GetStatusRequest, proto::WorkerStatus>(
      "GetStatus", [this](Context*, const auto&, auto* response) {
        *response = core_->Status(shutdown_->requested());
        return absl::OkStatus();
      });
  AddMethod<proto::ShutdownRequest, proto::ShutdownResponse>(
      "Shutdown", [this](Context* c, const auto& request, auto*) {
        shutdown_->Request(daemon::ShutdownRpcReason(c->peer(), request.reason()));
        return absl::OkStatus();
      });
}

}  // namespace worker
}  // namespace psc
