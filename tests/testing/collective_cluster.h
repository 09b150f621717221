// A multi_worker_mirrored cluster in one process: each worker a WorkerCore
// with its embedded replica (a ShardServer) and real Gloo groups over
// 127.0.0.1, the chief's store in memory, and the chief's view of the
// replicas (ReplicaGroupClient) for RunJob. A worker can be killed at a step
// (its core and replica destroyed: its peers' all-reduces fail) and
// restarted empty (the chief then lets it join).
#ifndef PSC_TESTS_TESTING_COLLECTIVE_CLUSTER_H_
#define PSC_TESTS_TESTING_COLLECTIVE_CLUSTER_H_

#include <map>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "chief/replica_group_client.h"
#include "chief/worker_client.h"
#include "common/base/clock.h"
#include "common/collective/memory_store.h"
#include "ps_server/shard_server.h"
#include "worker/embedded_shard_client.h"
#include "worker/worker_core.h"

namespace psc {
namespace testing {

// Thread-safe.
class CollectiveCluster : public chief::WorkerClient {
 public:
  explicit CollectiveCluster(int num_workers);
  ~CollectiveCluster() override;

  // What RunJob takes as its servers (and JobRunnerOptions::replica_group).
  chief::ReplicaGroupClient* replicas() { return group_.get(); }
  // The groups' store (JobRunnerOptions::group_store).
  collective::KeyValueStore* store() { return &store_; }
  // Worker w's variables as its replica holds them, in model order.
  absl::StatusOr<std::vector<std::vector<float>>> Variables(int w, const proto::JobSpec& job);

  int num_workers() const override { return num_workers_; }
  absl::Status StartJob(int worker, const proto::JobSpec& job) override ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<proto::UnitMetrics> RunUnit(int worker, const proto::RunUnitRequest& unit) override
      ABSL_LOCKS_EXCLUDED(mu_);
  void CancelUnit(int) override {}
  bool Alive(int worker) override ABSL_LOCKS_EXCLUDED(mu_);

  // The worker dies when it reaches `step` (before computing it); with
  // `restart`, a new empty process takes its place at once, before the
  // chief can notice the loss.
  void KillAtStep(int worker, int64_t step, bool restart = false) ABSL_LOCKS_EXCLUDED(mu_);
  // A dead worker comes back as a new process would: empty.
  void Restart(int worker) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Member {
    std::shared_ptr<ps_server::ShardServer> shard;
    std::shared_ptr<worker::EmbeddedShardClient> own;    // the worker's view
    std::shared_ptr<worker::EmbeddedShardClient> chief;  // the chief's view
    std::shared_ptr<worker::WorkerCore> core;
  };
  // Worker w's chief view now, or null when it is dead.
  std::shared_ptr<worker::EmbeddedShardClient> ChiefView(int w) ABSL_LOCKS_EXCLUDED(mu_);
  void Build(int w) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<proto::UnitMetrics> Run(worker::WorkerCore* core,
                                         const proto::RunUnitRequest& unit);

  const int num_workers_;
  base::RealClock clock_;
  collective::MemoryStore store_;
  worker::CollectiveSetup setup_;
  // The chief's clients reach whatever replica a worker has now.
  class Forwarder;
  std::vector<std::unique_ptr<Forwarder>> forwarders_;
  std::unique_ptr<chief::ReplicaGroupClient> group_;

  absl::Mutex mu_;
  std::vector<Member> members_ ABSL_GUARDED_BY(mu_);
  std::map<int, int64_t> kill_at_ ABSL_GUARDED_BY(mu_);
  std::map<int, bool> restart_at_once_ ABSL_GUARDED_BY(mu_);
  std::vector<bool> dead_ ABSL_GUARDED_BY(mu_);
};

}  // namespace testing
}  // namespace psc

#endif  // PSC_TESTS_TESTING_COLLECTIVE_CLUSTER_H_
