// A whole cluster in one process for semantic tests, on the production
// code: parameter-server shards (ps_server's ShardServer, the same object the
// daemons serve) reached through the production ParameterServerClient over
// an in-process ShardTransport, and workers (worker::WorkerCore, as the
// daemons run it, each with a client of its own) behind an in-process
// WorkerClient, driven by the chief's RunJob. No sockets.
#ifndef PSC_TESTS_TESTING_IN_PROCESS_CLUSTER_H_
#define PSC_TESTS_TESTING_IN_PROCESS_CLUSTER_H_

#include <functional>
#include <map>
#include <memory>
#include <set>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "chief/job_runner.h"
#include "common/base/clock.h"
#include "common/ps_client/parameter_server_client.h"
#include "ps_server/shard_server.h"
#include "worker/worker_core.h"

namespace psc {
namespace testing {

// The shard servers of an in-process cluster; a server can be restarted.
// Thread-safe.
class InProcessShards {
 public:
  explicit InProcessShards(int num_shards);
  ~InProcessShards();
  int size() const { return num_shards_; }
  std::shared_ptr<ps_server::ShardServer> Get(int i) const ABSL_LOCKS_EXCLUDED(mu_);
  // A server crash and restart: shard i is replaced by a fresh, unconfigured
  // one; the calls waiting on the old one fail UNAVAILABLE.
  void Restart(int i) ABSL_LOCKS_EXCLUDED(mu_);
  base::Clock* clock() { return &clock_; }

  // Every Push calls `gate` with its request first, on the pushing thread,
  // before the shard sees it: a test holds a worker's pushes back by
  // blocking there. Empty (the default): no gate. Set it before pushes run.
  void SetPushGate(std::function<void(const proto::PushRequest&)> gate) ABSL_LOCKS_EXCLUDED(mu_);
  std::function<void(const proto::PushRequest&)> push_gate() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  std::shared_ptr<ps_server::ShardServer> New(int i);

  base::RealClock clock_;
  const int num_shards_;
  mutable absl::Mutex mu_;
  std::vector<std::shared_ptr<ps_server::ShardServer>> servers_ ABSL_GUARDED_BY(mu_);
  std::function<void(const proto::PushRequest&)> push_gate_ ABSL_GUARDED_BY(mu_);
};

// A ShardTransport that calls a ShardServer directly: each call is one
// attempt, which CancelAll and a failing sibling end at once.
class InProcessShardTransport : public ps_client::ShardTransport {
 public:
  // `shards` is not owned; calls go to shards->Get(index) as it is then.
  InProcessShardTransport(InProcessShards* shards, int index) : shards_(shards), index_(index) {}

  absl::Status Push(const proto::PushRequest& request, proto::PushResponse* response,
                    const ps_client::Attempt& attempt) override;
  absl::Status Pull(const proto::PullRequest& request, proto::PullResponse* response,
                    const ps_client::Attempt& attempt) override;
  absl::Status Configure(const proto::ConfigureRequest& request,
                         const ps_client::Attempt& attempt) override;
  absl::Status CreateVariables(const proto::CreateVariablesRequest& request,
                               const ps_client::Attempt& attempt) override;
  absl::Status UpdateMembership(const proto::UpdateMembershipRequest& request,
                                proto::UpdateMembershipResponse* response,
                                const ps_client::Attempt& attempt) override;
  absl::Status SaveCheckpoint(const proto::SaveCheckpointRequest& request,
                              proto::SaveCheckpointResponse* response,
                              const ps_client::Attempt& attempt) override;
  absl::Status RestoreCheckpoint(const proto::RestoreCheckpointRequest& request,
                                 proto::RestoreCheckpointResponse* response,
                                 const ps_client::Attempt& attempt) override;
  absl::Status ExportState(const proto::ExportStateRequest& request,
                           proto::ExportStateResponse* response,
                           const ps_client::Attempt& attempt) override;
  absl::Status ImportState(const proto::ImportStateRequest& request,
                           proto::ImportStateResponse* response,
                           const ps_client::Attempt& attempt) override;
  absl::Status GetStats(proto::ShardStats* response, const ps_client::Attempt& attempt) override;
  absl::Status OpenDataChannel(proto::OpenDataChannelResponse* response,
                               const ps_client::Attempt& attempt) override;

 private:
  InProcessShards* const shards_;
  const int index_;
};

namespace internal {
// Holds the shards so that they are built before the client that uses them.
struct ShardsHolder {
  explicit ShardsHolder(std::shared_ptr<InProcessShards> s) : shards(std::move(s)) {}
  std::shared_ptr<InProcessShards> shards;
};
}  // namespace internal

// The production ParameterServerClient over in-process shards. Thread-safe.
class InProcessParameterClient : private internal::ShardsHolder,
                                 public ps_client::ParameterServerClient {
 public:
  // Over `num_shards` new shards.
  explicit InProcessParameterClient(int num_shards);
  // Over the shards of another client (another task's view of them).
  explicit InProcessParameterClient(std::shared_ptr<InProcessShards> shards);

  const std::shared_ptr<InProcessShards>& all_shards() const { return shards; }
  // The shard now serving shard i.
  ps_server::Shard& shard(int i) { return shards->Get(i)->shard(); }
  void RestartShard(int i) { shards->Restart(i); }
};

// Workers in process: a WorkerCore each, with its own client of `servers`'
// shards. Thread-safe.
class InProcessWorkerClient : public chief::WorkerClient {
 public:
  InProcessWorkerClient(int num_workers, InProcessParameterClient* servers);
  ~InProcessWorkerClient() override;
  int num_workers() const override { return num_workers_; }
  absl::Status StartJob(int worker, const proto::JobSpec& job) override;
  absl::StatusOr<proto::UnitMetrics> RunUnit(int worker,
                                             const proto::RunUnitRequest& unit) override;
  void CancelUnit(int worker) override;
  bool Alive(int worker) override;
  // WorkerCore::set_straggler_factor of `worker`; before its StartJob.
  void SetStragglerFactor(int worker, double factor) {
    cores_[worker]->set_straggler_factor(factor);
  }
  // The worker dies once it reaches `step` (before computing it): its unit
  // fails UNAVAILABLE and it answers nothing after.
  void KillAtStep(int worker, int64_t step);

 private:
  // Runs `unit` on the worker's core and waits for it.
  absl::StatusOr<proto::UnitMetrics> Run(int worker, const proto::RunUnitRequest& unit);

  const int num_workers_;
  std::vector<std::unique_ptr<InProcessParameterClient>> clients_;  // one per worker
  std::vector<std::unique_ptr<worker::WorkerCore>> cores_;
  absl::Mutex mu_;
  std::map<int, int64_t> kill_at_ ABSL_GUARDED_BY(mu_);
  std::set<int> dead_ ABSL_GUARDED_BY(mu_);
};

}  // namespace testing
}  // namespace psc

#endif  // PSC_TESTS_TESTING_IN_PROCESS_CLUSTER_H_
