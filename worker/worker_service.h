// The Worker gRPC service: a thin adapter that authenticates each call and
// hands it to the ReplicaTrainer. StartJob builds the trainer (data, model,
// channels to the servers); RunUnit runs on a thread of its own, never on a
// gRPC thread, and finishes its reactor when the unit is done. One unit at
// a time: a second is FAILED_PRECONDITION.
#ifndef PSC_WORKER_WORKER_SERVICE_H_
#define PSC_WORKER_WORKER_SERVICE_H_

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/base/shutdown.h"
#include "common/cluster/cluster_config.h"
#include "common/rpc/auth.h"
#include "common/rpc/grpc_parameter_client.h"
#include "common/rpc/security.h"
#include "proto/worker.grpc.pb.h"
#include "worker/replica_trainer.h"

namespace psc {
namespace worker {

// Thread-safe.
class WorkerService final : public proto::Worker::CallbackService {
 public:
  // `ps_addresses` are the cluster's servers, dialed with `security`. Jobs
  // train on `device_setup` (by default the CPU alone).
  WorkerService(int task_index, std::vector<proto::DeviceInfo> devices,
                std::vector<std::string> ps_addresses, rpc::SecurityOptions security,
                base::ShutdownSignal* shutdown, DeviceSetup device_setup = DeviceSetup());
  ~WorkerService() override;

  // Cancels a running unit and waits for its thread.
  void Stop();

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
  const std::vector<std::string> ps_addresses_;
  const rpc::SecurityOptions security_;
  const rpc::TokenAuthenticator auth_;
  base::ShutdownSignal* const shutdown_;
  const DeviceSetup device_setup_;

  absl::Mutex mu_;
  std::unique_ptr<rpc::GrpcParameterClient> servers_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<ReplicaTrainer> trainer_ ABSL_GUARDED_BY(mu_);
  std::string job_fingerprint_ ABSL_GUARDED_BY(mu_);  // serialized JobSpec
  std::string job_id_ ABSL_GUARDED_BY(mu_);
  bool running_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  int64_t current_unit_ ABSL_GUARDED_BY(mu_) = -1;
  int64_t steps_done_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread unit_thread_ ABSL_GUARDED_BY(mu_);
};

}  // namespace worker
}  // namespace psc

#endif  // PSC_WORKER_WORKER_SERVICE_H_
