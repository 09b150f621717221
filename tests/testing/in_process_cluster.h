// A whole cluster in one process for semantic tests: parameter-server
// shards (ps_server's Shard) behind an in-process ParameterClient, and
// workers (ReplicaTrainer) behind an in-process WorkerClient, driven by the
// chief's RunJob. No sockets; the same code paths as the daemons.
#ifndef PSC_TESTS_TESTING_IN_PROCESS_CLUSTER_H_
#define PSC_TESTS_TESTING_IN_PROCESS_CLUSTER_H_

#include <map>
#include <memory>
#include <set>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "chief/job_runner.h"
#include "common/base/clock.h"
#include "common/ps_client/parameter_client.h"
#include "ps_server/shard.h"
#include "worker/replica_trainer.h"

namespace psc {
namespace testing {

// Thread-safe.
class InProcessParameterClient : public ps_client::ParameterClient {
 public:
  explicit InProcessParameterClient(int num_shards);
  ~InProcessParameterClient() override;

  ps_server::Shard& shard(int i) { return *Get(i); }
  // A server crash and restart: the shard is replaced by a fresh,
  // unconfigured one; calls waiting on the old one fail UNAVAILABLE.
  void RestartShard(int i);

  int num_shards() const override { return num_shards_; }
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

  std::shared_ptr<ps_server::Shard> Get(int i);
  std::shared_ptr<ps_server::Shard> NewShard();

  base::RealClock clock_;
  const int num_shards_;
  absl::Mutex mu_;
  std::vector<std::shared_ptr<ps_server::Shard>> shards_ ABSL_GUARDED_BY(mu_);
  absl::Notification stop_;
  std::thread expirer_;
};

// Thread-safe.
class InProcessWorkerClient : public chief::WorkerClient {
 public:
  InProcessWorkerClient(int num_workers, ps_client::ParameterClient* servers)
      : num_workers_(num_workers), servers_(servers), trainers_(num_workers) {}
  int num_workers() const override { return num_workers_; }
  absl::Status StartJob(int worker, const proto::JobSpec& job) override;
  absl::StatusOr<proto::UnitMetrics> RunUnit(int worker,
                                             const proto::RunUnitRequest& unit) override;
  bool Alive(int worker) override;
  // The worker dies once it reaches `step` (before computing it): its unit
  // fails UNAVAILABLE and it answers nothing after.
  void KillAtStep(int worker, int64_t step);

 private:
  const int num_workers_;
  ps_client::ParameterClient* const servers_;
  absl::Mutex mu_;
  std::vector<std::unique_ptr<worker::ReplicaTrainer>> trainers_ ABSL_GUARDED_BY(mu_);
  std::map<int, int64_t> kill_at_ ABSL_GUARDED_BY(mu_);
  std::set<int> dead_ ABSL_GUARDED_BY(mu_);
};

}  // namespace testing
}  // namespace psc

#endif  // PSC_TESTS_TESTING_IN_PROCESS_CLUSTER_H_
