// WorkerClient over gRPC, with the cluster token; plus the end-of-job
// Shutdown of every ps and worker task.
#ifndef PSC_CHIEF_GRPC_WORKER_CLIENT_H_
#define PSC_CHIEF_GRPC_WORKER_CLIENT_H_

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "chief/worker_client.h"
#include "common/cluster/cluster_config.h"
#include "common/rpc/security.h"
#include "proto/worker.grpc.pb.h"

namespace psc {
namespace chief {

// Thread-safe.
class GrpcWorkerClient : public WorkerClient {
 public:
  // `seats` >= addresses.size(): the seats beyond the addresses get theirs
  // from SetAddress (a worker that joined); 0: as many as the addresses.
  GrpcWorkerClient(const std::vector<std::string>& addresses, const rpc::SecurityOptions& security,
                   int seats = 0);
  int num_workers() const override { return seats_; }
  absl::Status SetAddress(int worker, const std::string& address) override ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status StartJob(int worker, const proto::JobSpec& job) override;
  absl::StatusOr<proto::UnitMetrics> RunUnit(int worker,
                                             const proto::RunUnitRequest& unit) override;
  void CancelUnit(int worker) override ABSL_LOCKS_EXCLUDED(mu_);
  // GetStatus answers within 3 seconds.
  bool Alive(int worker) override;

 private:
  // One RunUnit call.
  absl::StatusOr<proto::UnitMetrics> RunUnitOnce(int worker, const proto::RunUnitRequest& unit);
  // Whether the worker answers and has no job: it restarted since StartJob.
  bool RestartedWithoutJob(int worker);

  // Worker `worker`'s stub and address; UNAVAILABLE for a seat without one.
  absl::StatusOr<std::shared_ptr<proto::Worker::Stub>> Stub(int worker, std::string* address)
      ABSL_LOCKS_EXCLUDED(mu_);

  const rpc::SecurityOptions security_;
  const int seats_;
  absl::Mutex mu_;
  std::vector<std::string> addresses_ ABSL_GUARDED_BY(mu_);
  std::vector<std::shared_ptr<proto::Worker::Stub>> stubs_ ABSL_GUARDED_BY(mu_);
  // Per worker: its RunUnit in flight (null: none), and a CancelUnit that
  // came before the call started.
  std::vector<grpc::ClientContext*> running_ ABSL_GUARDED_BY(mu_);
  std::vector<bool> cancel_pending_ ABSL_GUARDED_BY(mu_);
  // The job StartJob started, for a worker that restarts (unset: none yet).
  std::optional<proto::JobSpec> job_ ABSL_GUARDED_BY(mu_);
};

// Asks every ps and worker task of `cluster`, and the workers that joined
// (index -> address), to shut down; returns the first error (all are
// asked).
absl::Status ShutdownCluster(const cluster::ClusterConfig& cluster,
                             const rpc::SecurityOptions& security, const std::string& reason,
                             const std::map<int, std::string>& joined = {});

}  // namespace chief
}  // namespace psc

#endif  // PSC_CHIEF_GRPC_WORKER_CLIENT_H_
