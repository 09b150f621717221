#include "worker/embedded_shard_client.h"

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"

namespace psc {
namespace worker {

absl::Status EmbeddedShardClient::Check(int shard, size_t requests) const {
  if (cancelled_) return absl::CancelledError("the worker is stopping");
  if (shard != 0 || requests != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("the embedded replica is one shard; asked for shard ", shard, " with ",
                     requests, " request(s)"));
  }
  return absl::OkStatus();
}

absl::Status EmbeddedShardClient::PushAll(const std::vector<proto::PushRequest>& requests,
                                          std::vector<proto::PushResponse>* responses,
                                          absl::Duration timeout) {
  PSC_RETURN_IF_ERROR(Check(0, requests.size()));
  responses->resize(1);
  return server_->PushBlocking(requests[0], clock_->Now() + timeout, &(*responses)[0]);
}

absl::Status EmbeddedShardClient::PullAll(const std::vector<proto::PullRequest>& requests,
                                          std::vector<proto::PullResponse>* responses,
                                          absl::Duration timeout) {
  PSC_RETURN_IF_ERROR(Check(0, requests.size()));
  responses->resize(1);
  return server_->PullBlocking(requests[0], clock_->Now() + timeout, &(*responses)[0]);
}

absl::Status EmbeddedShardClient::Configure(int shard, const proto::ConfigureRequest& request) {
  PSC_RETURN_IF_ERROR(Check(shard));
  return server_->Configure(request);
}

absl::Status EmbeddedShardClient::CreateVariables(int shard,
                                                  const proto::CreateVariablesRequest& request) {
  PSC_RETURN_IF_ERROR(Check(shard));
  proto::CreateVariablesResponse response;
  return server_->CreateVariables(request, &response);
}

absl::Status EmbeddedShardClient::UpdateMembership(int shard,
                                                   const proto::UpdateMembershipRequest& request,
                                                   proto::UpdateMembershipResponse* response) {
  PSC_RETURN_IF_ERROR(Check(shard));
  return server_->UpdateMembership(request, response);
}

absl::Status EmbeddedShardClient::SaveCheckpoint(int shard,
                                                 const proto::SaveCheckpointRequest& request,
                                                 proto::SaveCheckpointResponse* response) {
  PSC_RETURN_IF_ERROR(Check(shard));
  return server_->SaveCheckpoint(request, response);
}

absl::Status EmbeddedShardClient::RestoreCheckpoint(int shard,
                                                    const proto::RestoreCheckpointRequest& request,
                                                    proto::RestoreCheckpointResponse* response) {
  PSC_RETURN_IF_ERROR(Check(shard));
  return server_->RestoreCheckpoint(request, response);
}

absl::Status EmbeddedShardClient::ExportState(int shard, const proto::ExportStateRequest& request,
                                              proto::ExportStateResponse* response) {
  PSC_RETURN_IF_ERROR(Check(shard));
  return server_->ExportState(request, response);
}

absl::Status EmbeddedShardClient::ImportState(int shard, const proto::ImportStateRequest& request,
                                              proto::ImportStateResponse* response) {
  PSC_RETURN_IF_ERROR(Check(shard));
  return server_->ImportState(request, response);
}

absl::StatusOr<proto::ShardStats> EmbeddedShardClient::GetStats(int shard) {
  PSC_RETURN_IF_ERROR(Check(shard));
  return server_->Stats();
}

}  // namespace worker
}  // namespace psc
