#include "tests/testing/collective_cluster.h"

#include <utility>

#include "absl/synchronization/notification.h"
#include "common/compute/model.h"
#include "common/job/job_model.h"
#include "common/tensor/tensor.h"

namespace psc {
namespace testing {

// The chief's client of one worker's replica: whatever replica the worker
// has now; UNAVAILABLE while it is dead (as a killed process's port).
class CollectiveCluster::Forwarder : public ps_client::ParameterClient {
 public:
  Forwarder(CollectiveCluster* cluster, int w) : cluster_(cluster), w_(w) {}
  int num_shards() const override { return 1; }
  absl::Status PushAll(const std::vector<proto::PushRequest>& q,
                       std::vector<proto::PushResponse>* r, absl::Duration t) override {
    return Call([&](auto& c) { return c.PushAll(q, r, t); });
  }
  absl::Status PullAll(const std::vector<proto::PullRequest>& q,
                       std::vector<proto::PullResponse>* r, absl::Duration t) override {
    return Call([&](auto& c) { return c.PullAll(q, r, t); });
  }
  absl::Status Configure(int s, const proto::ConfigureRequest& q) override {
    return Call([&](auto& c) { return c.Configure(s, q); });
  }
  absl::Status CreateVariables(int s, const proto::CreateVariablesRequest& q) override {
    return Call([&](auto& c) { return c.CreateVariables(s, q); });
  }
  absl::Status UpdateMembership(int s, const proto::UpdateMembershipRequest& q,
                                proto::UpdateMembershipResponse* r) override {
    return Call([&](auto& c) { return c.UpdateMembership(s, q, r); });
  }
  absl::Status SaveCheckpoint(int s, const proto::SaveCheckpointRequest& q,
                              proto::SaveCheckpointResponse* r) override {
    return Call([&](auto& c) { return c.SaveCheckpoint(s, q, r); });
  }
  absl::Status RestoreCheckpoint(int s, const proto::RestoreCheckpointRequest& q,
                                 proto::RestoreCheckpointResponse* r) override {
    return Call([&](auto& c) { return c.RestoreCheckpoint(s, q, r); });
  }
  absl::Status ExportState(int s, const proto::ExportStateRequest& q,
                           proto::ExportStateResponse* r) override {
    return Call([&](auto& c) { return c.ExportState(s, q, r); });
  }
  absl::Status ImportState(int s, const proto::ImportStateRequest& q,
                           proto::ImportStateResponse* r) override {
    return Call([&](auto& c) { return c.ImportState(s, q, r); });
  }
  absl::StatusOr<proto::ShardStats> GetStats(int s) override {
    auto c = cluster_->ChiefView(w_);
    if (c == nullptr) return absl::UnavailableError("worker is dead");
    return c->GetStats(s);
  }
  void CancelAll() override {}
  void CancelInFlight() override {}

 private:
  template <typename F>
  absl::Status Call(F f) {
    auto c = cluster_->ChiefView(w_);
    if (c == nullptr) return absl::UnavailableError("worker is dead");
    return f(*c);
  }
  CollectiveCluster* const cluster_;
  const int w_;
};

CollectiveCluster::CollectiveCluster(int num_workers) : num_workers_(num_workers) {
  setup_.store = &store_;
  setup_.hostname = "127.0.0.1";
  std::vector<ps_client::ParameterClient*> views;
  for (int w = 0; w < num_workers; ++w) {
    forwarders_.push_back(std::make_unique<Forwarder>(this, w));
    views.push_back(forwarders_.back().get());
  }
  group_ = std::make_unique<chief::ReplicaGroupClient>(std::move(views));
  absl::MutexLock lock(&mu_);
  members_.resize(num_workers);
  dead_.assign(num_workers, false);
  for (int w = 0; w < num_workers; ++w) Build(w);
}

CollectiveCluster::~CollectiveCluster() {
  std::vector<Member> members;
  {
    absl::MutexLock lock(&mu_);
    members = std::move(members_);
  }
  for (Member& m : members) {
    if (m.core) m.core->Stop();
    if (m.shard) m.shard->Stop();
  }
}

void CollectiveCluster::Build(int w) {
  Member& m = members_[w];
  ps_server::ShardServerOptions options;
  options.shard.clock = &clock_;
  m.shard = std::make_shared<ps_server::ShardServer>(options);
  m.own = std::make_shared<worker::EmbeddedShardClient>(m.shard.get(), &clock_);
  m.chief = std::make_shared<worker::EmbeddedShardClient>(m.shard.get(), &clock_);
  m.core = std::make_shared<worker::WorkerCore>(w, std::vector<proto::DeviceInfo>{}, nullptr,
                                                worker::DeviceSetup(), m.own.get(), &setup_);
}

std::shared_ptr<worker::EmbeddedShardClient> CollectiveCluster::ChiefView(int w) {
  absl::MutexLock lock(&mu_);
  return dead_[w] ? nullptr : members_[w].chief;
}

absl::Status CollectiveCluster::StartJob(int worker, const proto::JobSpec& job) {
  std::shared_ptr<worker::WorkerCore> core;
  {
    absl::MutexLock lock(&mu_);
    if (dead_[worker]) return absl::UnavailableError("worker is dead");
    core = members_[worker].core;
  }
  return core->StartJob(job);
}

bool CollectiveCluster::Alive(int worker) {
  absl::MutexLock lock(&mu_);
  return !dead_[worker];
}

void CollectiveCluster::KillAtStep(int worker, int64_t step, bool restart) {
  absl::MutexLock lock(&mu_);
  kill_at_[worker] = step;
  restart_at_once_[worker] = restart;
}

void CollectiveCluster::Restart(int worker) {
  absl::MutexLock lock(&mu_);
  if (!dead_[worker]) return;
  Build(worker);
  dead_[worker] = false;
}

absl::StatusOr<proto::UnitMetrics> CollectiveCluster::Run(worker::WorkerCore* core,
                                                          const proto::RunUnitRequest& unit) {
  absl::Notification done;
  absl::StatusOr<proto::UnitMetrics> result = absl::UnknownError("not run");
  core->RunUnit(unit, [&](absl::StatusOr<proto::UnitMetrics> m) {
    result = std::move(m);
    done.Notify();
  });
  done.WaitForNotification();
  return result;
}

absl::StatusOr<proto::UnitMetrics> CollectiveCluster::RunUnit(int worker,
                                                              const proto::RunUnitRequest& unit) {
  std::shared_ptr<worker::WorkerCore> core;
  int64_t kill_at = -1;
  {
    absl::MutexLock lock(&mu_);
    if (dead_[worker]) return absl::UnavailableError("worker is dead");
    core = members_[worker].core;
    auto it = kill_at_.find(worker);
    if (it != kill_at_.end()) kill_at = it->second;
  }
  const int64_t end = unit.first_step() + unit.num_steps();
  if (kill_at < unit.first_step() || kill_at >= end) return Run(core.get(), unit);
  proto::RunUnitRequest part = unit;
  part.set_num_steps(kill_at - unit.first_step());
  if (part.num_steps() > 0) {
    absl::StatusOr<proto::UnitMetrics> m = Run(core.get(), part);
    if (!m.ok()) return m;
  }
  // The process dies: its group's connections close with it.
  Member gone;
  {
    absl::MutexLock lock(&mu_);
    dead_[worker] = true;
    kill_at_.erase(worker);
    gone = std::move(members_[worker]);
    members_[worker] = Member();
  }
  core.reset();
  gone.core->Stop();
  gone.core.reset();
  gone.shard->Stop();
  {
    absl::MutexLock lock(&mu_);
    if (restart_at_once_[worker]) {
      Build(worker);
      dead_[worker] = false;
    }
  }
  return absl::UnavailableError("worker killed");
}

absl::StatusOr<std::vector<std::vector<float>>> CollectiveCluster::Variables(
    int w, const proto::JobSpec& job) {
  auto view = ChiefView(w);
  if (view == nullptr) return absl::UnavailableError("worker is dead");
  std::vector<proto::PullResponse> r;
  absl::Status s = view->PullAll({proto::PullRequest()}, &r, absl::Seconds(10));
  if (!s.ok()) return s;
  absl::StatusOr<compute::Model> model = job::ModelForJob(job);
  if (!model.ok()) return model.status();
  std::map<std::string, std::vector<float>> parts;
  for (const auto& v : r[0].variables()) parts[v.name()] = tensor::FloatValues(v.tensor());
  std::vector<std::vector<float>> out;
  for (const auto& v : model->variables()) out.push_back(parts.at(v.name));
  return out;
}

}  // namespace testing
}  // namespace psc
