// The Worker gRPC service: a thin adapter that authenticates each call and
// hands it to the worker. Running units arrives with the CPU-worker and
// end-to-end issues; until then StartJob/RunUnit answer UNIMPLEMENTED (after
// the token check), and GetStatus/Shutdown are real.
#ifndef PSC_WORKER_WORKER_SERVICE_H_
#define PSC_WORKER_WORKER_SERVICE_H_

#include <string>
#include <vector>

#include "common/rpc/auth.h"
#include "common/shutdown.h"
#include "proto/worker.grpc.pb.h"

namespace psc {
namespace worker {

// Thread-safe.
class WorkerService final : public proto::Worker::CallbackService {
 public:
  WorkerService(int task_index, std::vector<proto::DeviceInfo> devices, std::string token,
                ShutdownSignal* shutdown);

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
  const int task_index_;
  const std::vector<proto::DeviceInfo> devices_;
  const TokenAuthenticator auth_;
  ShutdownSignal* const shutdown_;
};

}  // namespace worker
}  // namespace psc

#endif  // PSC_WORKER_WORKER_SERVICE_H_
