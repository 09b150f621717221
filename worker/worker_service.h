// The Worker gRPC service: a thin adapter that authenticates each call and
// hands it to the WorkerCore. RunUnit holds no gRPC thread: its reactor is
// finished from the unit's thread.
#ifndef PSC_WORKER_WORKER_SERVICE_H_
#define PSC_WORKER_WORKER_SERVICE_H_

#include <string>

#include "common/base/shutdown.h"
#include "common/rpc/auth.h"
#include "proto/worker.grpc.pb.h"
#include "worker/worker_core.h"

namespace psc {
namespace worker {

// Thread-safe.
class WorkerService final : public proto::Worker::CallbackService {
 public:
  // `core` and `shutdown` are not owned and must outlive the service.
  WorkerService(WorkerCore* core, std::string token, base::ShutdownSignal* shutdown)
      : core_(core), auth_(std::move(token)), shutdown_(shutdown) {}

  grpc::ServerUnaryReactor* StartJob(grpc::CallbackServerContext* context,
                                     const proto::StartJobRequest* request,
                                     proto::StartJobResponse* response) override;
  grpc::ServerUnaryReactor* RunUnit(grpc::CallbackServerContext* context,
                                    const proto::RunUnitRequest* request,
                                    proto::RunUnitResponse* response) override;
  grpc::ServerUnaryReactor* GetStatus(grpc::CallbackServerContext* context,
                                      const proto::GetStatusRequest* request,
                                      proto::WorkerStatus* response) override;
  grpc::ServerUnaryReactor* Shutdown(grpc::CallbackServerContext* context,
                                     const proto::ShutdownRequest* request,
                                     proto::ShutdownResponse* response) override;

 private:
  WorkerCore* const core_;
  const rpc::TokenAuthenticator auth_;
  base::ShutdownSignal* const shutdown_;
};

}  // namespace worker
}  // namespace psc

#endif  // PSC_WORKER_WORKER_SERVICE_H_
