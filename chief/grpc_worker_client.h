// WorkerClient over gRPC, with the cluster token; plus the end-of-job
// Shutdown of every ps and worker task.
#ifndef PSC_CHIEF_GRPC_WORKER_CLIENT_H_
#define PSC_CHIEF_GRPC_WORKER_CLIENT_H_

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
  GrpcWorkerClient(const std::vector<std::string>& addresses, const rpc::SecurityOptions& security);
  int num_workers() const override { return static_cast<int>(stubs_.size()); }
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

  const rpc::SecurityOptions security_;
  std::vector<std::string> addresses_;
  std::vector<std::unique_ptr<proto::Worker::Stub>> stubs_;
  absl::Mutex mu_;
  // Per worker: its RunUnit in flight (null: none), and a CancelUnit that
  // came before the call started.
  std::vector<grpc::ClientContext*> running_ ABSL_GUARDED_BY(mu_);
  std::vector<bool> cancel_pending_ ABSL_GUARDED_BY(mu_);
  // The job StartJob started, for a worker that restarts (unset: none yet).
  std::optional<proto::JobSpec> job_ ABSL_GUARDED_BY(mu_);
};

// Asks every ps and worker task of `cluster` to shut down; returns the first
// error (all are asked).
absl::Status ShutdownCluster(const cluster::ClusterConfig& cluster,
                             const rpc::SecurityOptions& security, const std::string& reason);

}  // namespace chief
}  // namespace psc

#endif  // PSC_CHIEF_GRPC_WORKER_CLIENT_H_
