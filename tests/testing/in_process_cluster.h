// A whole cluster in one process for semantic tests: parameter-server
// shards (ps_server's Shard) behind an in-process ParameterClient, and
// workers (ReplicaTrainer) behind an in-process WorkerClient, driven by the
// chief's RunJob. No sockets; the same code paths as the daemons.
#ifndef PSC_TESTS_TESTING_IN_PROCESS_CLUSTER_H_
#define PSC_TESTS_TESTING_IN_PROCESS_CLUSTER_H_

#include <memory>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "chief/job_runner.h"
#include "common/clock.h"
#include "common/parameter_client.h"
#include "ps_server/shard.h"
#include "worker/replica_trainer.h"

namespace psc {
namespace testing {

// Thread-safe.
class InProcessParameterClient : public ParameterClient {
 public:
  explicit InProcessParameterClient(int num_shards);
  ~InProcessParameterClient() override;

  ps::Shard& shard(int i) { return *shards_[i]; }

  int num_shards() const override { return static_cast<int>(shards_.size()); }
  absl::Status PushAll(const std::vector<proto::PushRequest>& requests,
                       std::vector<proto::PushResponse>* responses,
                       absl::Duration timeout) override;
  absl::Status PullAll(const std::vector<proto::PullRequest>& requests,
                       std::vector<proto::PullResponse>* responses,
                       absl::Duration timeout) override;
  absl::Status Configure(int shard, const proto::ConfigureRequest& request) override;
  absl::Status CreateVariables(int shard, const proto::CreateVariablesRequest& request) override;
  absl::Status UpdateMembership(int shard, const proto::UpdateMembershipRequest& request,
                                proto::UpdateMembershipResponse* response) override;
  absl::Status SaveCheckpoint(int shard, const proto::SaveCheckpointRequest& request,
                              proto::SaveCheckpointResponse* response) override;
  absl::Status RestoreCheckpoint(int shard, const proto::RestoreCheckpointRequest& request,
                                 proto::RestoreCheckpointResponse* response) override;
  absl::StatusOr<proto::ShardStats> GetStats(int shard) override;

 private:
  absl::Status PullOne(int shard, const proto::PullRequest& request, proto::PullResponse* response,
                       absl::Duration timeout);

  RealClock clock_;
  std::vector<std::unique_ptr<ps::Shard>> shards_;
  absl::Notification stop_;
  std::thread expirer_;
};

// Thread-safe.
class InProcessWorkerClient : public chief::WorkerClient {
 public:
  InProcessWorkerClient(int num_workers, ParameterClient* servers)
      : num_workers_(num_workers), servers_(servers), trainers_(num_workers) {}
  int num_workers() const override { return num_workers_; }
  absl::Status StartJob(int worker, const proto::JobSpec& job) override;
  absl::StatusOr<proto::UnitMetrics> RunUnit(int worker,
                                             const proto::RunUnitRequest& unit) override;

 private:
  const int num_workers_;
  ParameterClient* const servers_;
  absl::Mutex mu_;
  std::vector<std::unique_ptr<worker::ReplicaTrainer>> trainers_ ABSL_GUARDED_BY(mu_);
};

}  // namespace testing
}  // namespace psc

#endif  // PSC_TESTS_TESTING_IN_PROCESS_CLUSTER_H_
