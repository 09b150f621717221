#include "tests/testing/in_process_cluster.h"

#include "absl/strings/str_cat.h"

namespace psc {
namespace testing {

InProcessParameterClient::InProcessParameterClient(int num_shards) {
  for (int i = 0; i < num_shards; ++i) {
    ps::ShardOptions options;
    options.clock = &clock_;
    shards_.push_back(std::make_unique<ps::Shard>(options));
  }
  expirer_ = std::thread([this] {
    while (!stop_.WaitForNotificationWithTimeout(absl::Milliseconds(20))) {
      for (auto& s : shards_) s->ExpireWaiters();
    }
  });
}

InProcessParameterClient::~InProcessParameterClient() {
  stop_.Notify();
  expirer_.join();
  for (auto& s : shards_) s->Shutdown();
}

absl::Status InProcessParameterClient::PullOne(int shard, const proto::PullRequest& request,
                                               proto::PullResponse* response,
                                               absl::Duration timeout) {
  absl::Notification done;
  absl::Status status;
  shards_[shard]->Pull(request, clock_.Now() + timeout, response, [&](absl::Status s) {
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
    if (absl::Status s = shards_[i]->Push(requests[i], &(*responses)[i]); !s.ok()) return s;
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
  return shards_[shard]->Configure(r);
}
absl::Status InProcessParameterClient::CreateVariables(int shard,
                                                       const proto::CreateVariablesRequest& r) {
  proto::CreateVariablesResponse response;
  return shards_[shard]->CreateVariables(r, &response);
}
absl::Status InProcessParameterClient::UpdateMembership(int shard,
                                                        const proto::UpdateMembershipRequest& r,
                                                        proto::UpdateMembershipResponse* response) {
  return shards_[shard]->UpdateMembership(r, response);
}
absl::Status InProcessParameterClient::SaveCheckpoint(int shard,
                                                      const proto::SaveCheckpointRequest& r,
                                                      proto::SaveCheckpointResponse* response) {
  return shards_[shard]->SaveCheckpoint(r, response);
}
absl::Status InProcessParameterClient::RestoreCheckpoint(
    int shard, const proto::RestoreCheckpointRequest& r,
    proto::RestoreCheckpointResponse* response) {
  return shards_[shard]->RestoreCheckpoint(r, response);
}
absl::StatusOr<proto::ShardStats> InProcessParameterClient::GetStats(int shard) {
  return shards_[shard]->Stats();
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
  {
    absl::MutexLock lock(&mu_);
    trainer = trainers_[worker].get();
  }
  if (trainer == nullptr) return absl::FailedPreconditionError("no job started");
  return trainer->RunUnit(unit, nullptr);
}

}  // namespace testing
}  // namespace psc
