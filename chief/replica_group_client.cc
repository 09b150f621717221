#include "chief/replica_group_client.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/base/status_context.h"
#include "common/base/status_macros.h"

namespace psc {
namespace chief {
namespace {

absl::Status OneShard(int shard) {
  if (shard != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("multi_worker_mirrored replicas are one shard; asked for shard ", shard));
  }
  return absl::OkStatus();
}

absl::Status Named(int worker, const absl::Status& s) {
  return base::Prefix(s, absl::StrCat("worker:", worker, "'s replica"));
}

}  // namespace

ReplicaGroupClient::ReplicaGroupClient(std::vector<ps_client::ParameterClient*> replicas)
    : replicas_(std::move(replicas)) {}

void ReplicaGroupClient::SetLive(std::function<std::vector<int>()> live) {
  absl::MutexLock lock(&mu_);
  live_ = std::move(live);
}

std::vector<int> ReplicaGroupClient::Live() const {
  std::function<std::vector<int>()> live;
  {
    absl::MutexLock lock(&mu_);
    live = live_;
  }
  if (live) return live();
  std::vector<int> all;
  for (int w = 0; w < num_workers(); ++w) all.push_back(w);
  return all;
}

absl::Status ReplicaGroupClient::OnEvery(
    const std::function<absl::Status(ps_client::ParameterClient*)>& call) {
  const std::vector<int> live = Live();
  if (live.empty()) return absl::UnavailableError("no live worker holds a replica");
  for (int w : live) {
    if (absl::Status s = call(replicas_[w]); !s.ok()) return Named(w, s);
  }
  return absl::OkStatus();
}

absl::Status ReplicaGroupClient::OnFirst(
    const std::function<absl::Status(ps_client::ParameterClient*)>& call) {
  const std::vector<int> live = Live();
  if (live.empty()) return absl::UnavailableError("no live worker holds a replica");
  absl::Status first;
  for (int w : live) {
    absl::Status s = call(replicas_[w]);
    if (s.ok()) return s;
    // A worker's own refusal (a bad request) is the same on every replica.
    if (!absl::IsUnavailable(s) && !absl::IsDeadlineExceeded(s) && !absl::IsCancelled(s)) {
      return Named(w, s);
    }
    if (first.ok()) first = Named(w, s);
  }
  return first;
}

absl::Status ReplicaGroupClient::PushAll(const std::vector<proto::PushRequest>&,
                                         std::vector<proto::PushResponse>*, absl::Duration) {
  return absl::UnimplementedError("the chief pushes no gradient to the workers' replicas");
}

absl::Status ReplicaGroupClient::PullAll(const std::vector<proto::PullRequest>& requests,
                                         std::vector<proto::PullResponse>* responses,
                                         absl::Duration timeout) {
  return OnFirst(
      [&](ps_client::ParameterClient* r) { return r->PullAll(requests, responses, timeout); });
}

absl::Status ReplicaGroupClient::Configure(int shard, const proto::ConfigureRequest& request) {
  PSC_RETURN_IF_ERROR(OneShard(shard));
  proto::ConfigureRequest c = request;
  c.set_num_workers(1);  // each replica's one gradient per step: the group's sum
  c.mutable_policy()->set_mode(proto::MODE_SYNC);
  c.mutable_policy()->set_replicas_to_aggregate(0);
  {
    absl::MutexLock lock(&mu_);
    configure_ = c;
  }
  return OnEvery([&](ps_client::ParameterClient* r) { return r->Configure(0, c); });
}

absl::Status ReplicaGroupClient::ConfigureReplica(int worker) {
  std::optional<proto::ConfigureRequest> c;
  {
    absl::MutexLock lock(&mu_);
    c = configure_;
  }
  if (!c.has_value()) return absl::FailedPreconditionError("the replicas are not configured yet");
  if (absl::Status s = replicas_[worker]->Configure(0, *c); !s.ok()) return Named(worker, s);
  return absl::OkStatus();
}

absl::Status ReplicaGroupClient::CreateVariables(int shard,
                                                 const proto::CreateVariablesRequest& request) {
  PSC_RETURN_IF_ERROR(OneShard(shard));
  return OnEvery([&](ps_client::ParameterClient* r) { return r->CreateVariables(0, request); });
}

absl::Status ReplicaGroupClient::UpdateMembership(int shard, const proto::UpdateMembershipRequest&,
                                                  proto::UpdateMembershipResponse* response) {
  // Answered here, without a call: Membership sends it under its lock,
  // which Live() would take again. A replica never holds a partial step.
  PSC_RETURN_IF_ERROR(OneShard(shard));
  response->Clear();
  return absl::OkStatus();
}

absl::Status ReplicaGroupClient::SaveCheckpoint(int shard,
                                                const proto::SaveCheckpointRequest& request,
                                                proto::SaveCheckpointResponse* response) {
  PSC_RETURN_IF_ERROR(OneShard(shard));
  return OnFirst(
      [&](ps_client::ParameterClient* r) { return r->SaveCheckpoint(0, request, response); });
}

absl::Status ReplicaGroupClient::RestoreCheckpoint(int shard,
                                                   const proto::RestoreCheckpointRequest& request,
                                                   proto::RestoreCheckpointResponse* response) {
  PSC_RETURN_IF_ERROR(OneShard(shard));
  return OnEvery(
      [&](ps_client::ParameterClient* r) { return r->RestoreCheckpoint(0, request, response); });
}

absl::Status ReplicaGroupClient::ExportState(int shard, const proto::ExportStateRequest& request,
                                             proto::ExportStateResponse* response) {
  PSC_RETURN_IF_ERROR(OneShard(shard));
  return OnFirst(
      [&](ps_client::ParameterClient* r) { return r->ExportState(0, request, response); });
}

absl::Status ReplicaGroupClient::ImportState(int shard, const proto::ImportStateRequest& request,
                                             proto::ImportStateResponse* response) {
  PSC_RETURN_IF_ERROR(OneShard(shard));
  return OnEvery(
      [&](ps_client::ParameterClient* r) { return r->ImportState(0, request, response); });
}

absl::StatusOr<proto::ShardStats> ReplicaGroupClient::GetStats(int shard) {
  PSC_RETURN_IF_ERROR(OneShard(shard));
  proto::ShardStats stats;
  PSC_RETURN_IF_ERROR(OnFirst([&](ps_client::ParameterClient* r) {
    absl::StatusOr<proto::ShardStats> s = r->GetStats(0);
    if (s.ok()) stats = *std::move(s);
    return s.status();
  }));
  return stats;
}

void ReplicaGroupClient::CancelAll() {
  for (ps_client::ParameterClient* r : replicas_) r->CancelAll();
}

void ReplicaGroupClient::CancelInFlight() {
  for (ps_client::ParameterClient* r : replicas_) r->CancelInFlight();
}

}  // namespace chief
}  // namespace psc
