// How the chief reaches the workers, without naming a transport:
// GrpcWorkerClient (grpc_worker_client.h) in the daemon, an in-process
// client over worker::WorkerCore in the tests.
#ifndef PSC_CHIEF_WORKER_CLIENT_H_
#define PSC_CHIEF_WORKER_CLIENT_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/job.pb.h"
#include "proto/worker.pb.h"

namespace psc {
namespace chief {

// Implementations are thread-safe.
class WorkerClient {
 public:
  virtual ~WorkerClient() = default;
  // Seats: the workers the job may hold, TF_CONFIG's and joined ones.
  virtual int num_workers() const = 0;
  // Where worker `worker` (a seat a worker joined) is reached from now on.
  // An in-process client, whose workers need no address, ignores it.
  virtual absl::Status SetAddress(int worker, const std::string& address) {
    (void)worker;
    (void)address;
    return absl::OkStatus();
  }
  virtual absl::Status StartJob(int worker, const proto::JobSpec& job) = 0;
  // Blocks until the unit is done, or CANCELLED by CancelUnit.
  virtual absl::StatusOr<proto::UnitMetrics> RunUnit(int worker,
                                                     const proto::RunUnitRequest& unit) = 0;
  // Ends the worker's RunUnit call in flight, if any: the chief declared the
  // worker lost and no longer waits for it.
  virtual void CancelUnit(int worker) = 0;
  // Whether the worker process still answers (after a failed unit: a live
  // worker failed because of the servers; a dead one is lost).
  virtual bool Alive(int worker) = 0;
};

}  // namespace chief
}  // namespace psc

#endif  // PSC_CHIEF_WORKER_CLIENT_H_
