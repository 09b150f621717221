#include "tests/testing/in_process_cluster.h"

#include "absl/strings/str_cat.h"

namespace psc {
namespace testing {

InProcessParameterClient::InProcessParameterClient(int num_shards) : num_shards_(num_shards) {
  {
    absl::MutexLock lock(&mu_);
    for (int i = 0; i < num_shards; ++i) shards_.push_back(NewShard());
  }
  expirer_ = std::thread([this] {
    while (!stop_.WaitForNotificationWithTimeout(absl::Milliseconds(20))) {
      for (int i = 0; i < num_shards_; ++i) Get(i)->ExpireWaiters();
    }
  });
}

InProcessParameterClient::~InProcessParameterClient() {
  stop_.Notify();
  expirer_.join();
  for (int i = 0; i < num_shards_; ++i) Get(i)->Shutdown();
}

std::shared_ptr<ps_server::Shard> InProcessParameterClient::NewShard() {
  ps_server::ShardOptions options;
  options.clock = &clock_;
  return std::make_shared<ps_server::Shard>(options);
}

std::shared_ptr<ps_server::Shard> InProcessParameterClient::Get(int i) {
  absl::MutexLock lock(&mu_);
  return shards_[i];
}

void InProcessParameterClient::RestartShard(int i) {
  std::shared_ptr<ps_server::Shard> old;
  {
    absl::MutexLock lock(&mu_);
    old = shards_[i];
    shards_[i] = NewShard();
  }
  old->Shutdown();
}

absl::Status InProcessParameterClient::PullOne(int shard, const proto::PullRequest& request,
                                               proto::PullResponse* response,
                                               absl::Duration timeout) {
  absl::Notification done;
  absl::Status status;
  Get(shard)->Pull(request, clock_.Now() + timeout, response, [&](absl::Status s) {
    status = s;
    done.Notify();
  });
  done.WaitForNotification();
  return status;
}

absl::Status InProcessParameterClient::PushAll(const std::vector<proto::PushRequest>& requests,
                                               std::vector<proto::PushResponse>* responses,
                                               absl::Duration timeout) {
  responses->resize(requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    if (absl::Status s = Get(static_cast<int>(i))->Push(requests[i], &(*responses)[i]); !s.ok())
      return s;
  }
  for (size_t i = 0; i < requests.size(); ++i) {
    if (!requests[i].pull_after()) continue;
    proto::PullRequest pull;
    pull.set_min_version(requests[i].pull_min_version());
    pull.set_worker(requests[i].id().worker());
    pull.set_worker_clock(requests[i].worker_clock());
    proto::PullResponse pulled;
    if (absl::Status s = PullOne(static_cast<int>(i), pull, &pulled, timeout); !s.ok()) return s;
    (*responses)[i].set_version(pulled.version());
    (*responses)[i].mutable_variables()->Swap(pulled.mutable_variables());
  }
  return absl::OkStatus();
}

absl::Status InProcessParameterClient::PullAll(const std::vector<proto::PullRequest>& requests,
                                               std::vector<proto::PullResponse>* responses,
                                               absl::Duration timeout) {
  responses->resize(requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    if (absl::Status s = PullOne(static_cast<int>(i), requests[i], &(*responses)[i], timeout);
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

absl::Status InProcessParameterClient::Configure(int shard, const proto::ConfigureRequest& r) {
  return Get(shard)->Configure(r);
}
absl::Status InProcessParameterClient::CreateVariables(int shard,
                                                       const proto::CreateVariablesRequest& r) {
  proto::CreateVariablesResponse response;
  return Get(shard)->CreateVariables(r, &response);
}
absl::Status InProcessParameterClient::UpdateMembership(int shard,
                                                        const proto::UpdateMembershipRequest& r,
                                                        proto::UpdateMembershipResponse* response) {
  return Get(shard)->UpdateMembership(r, response);
}
absl::Status InProcessParameterClient::SaveCheckpoint(int shard,
                                                      const proto::SaveCheckpointRequest& r,
                                                      proto::SaveCheckpointResponse* response) {
  return Get(shard)->SaveCheckpoint(r, response);
}
absl::Status InProcessParameterClient::RestoreCheckpoint(
    int shard, const proto::RestoreCheckpointRequest& r,
    proto::RestoreCheckpointResponse* response) {
  return Get(shard)->RestoreCheckpoint(r, response);
}
absl::StatusOr<proto::ShardStats> InProcessParameterClient::GetStats(int shard) {
  return Get(shard)->Stats();
}

absl::Status InProcessWorkerClient::StartJob(int worker, const proto::JobSpec& job) {
  auto trainer = worker::ReplicaTrainer::Create(job, worker, servers_);
  if (!trainer.ok()) return trainer.status();
  absl::MutexLock lock(&mu_);
  trainers_[worker] = *std::move(trainer);
  return absl::OkStatus();
}

absl::StatusOr<proto::UnitMetrics> InProcessWorkerClient::RunUnit(
    int worker, const proto::RunUnitRequest& unit) {
  worker::ReplicaTrainer* trainer;
  int64_t kill_at = -1;
  {
    absl::MutexLock lock(&mu_);
    if (dead_.count(worker)) return absl::UnavailableError("worker is dead");
    trainer = trainers_[worker].get();
    auto it = kill_at_.find(worker);
    if (it != kill_at_.end()) kill_at = std::max(it->second, unit.first_step());
  }
  if (trainer == nullptr) return absl::FailedPreconditionError("no job started");
  const int64_t end = unit.first_step() + unit.num_steps();
  if (kill_at < 0 || kill_at >= end) return trainer->RunUnit(unit, nullptr);
  proto::RunUnitRequest part = unit;
  part.set_num_steps(kill_at - unit.first_step());
  if (part.num_steps() > 0) {
    auto partial = trainer->RunUnit(part, nullptr);
    if (!partial.ok()) return partial.status();
  }
  absl::MutexLock lock(&mu_);
  dead_.insert(worker);
  return absl::UnavailableError("worker killed");
}

bool InProcessWorkerClient::Alive(int worker) {
  absl::MutexLock lock(&mu_);
  return dead_.count(worker) == 0;
}

void InProcessWorkerClient::KillAtStep(int worker, int64_t step) {
  absl::MutexLock lock(&mu_);
  kill_at_[worker] = step;
}

}  // namespace testing
}  // namespace psc
