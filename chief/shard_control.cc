#include "chief/shard_control.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/base/logging.h"
#include "common/base/status_macros.h"
#include "common/placement/placement.h"

namespace psc {
namespace chief {

absl::Status ShardControl::ConfigureAll() {
  for (int s = 0; s < servers_->num_shards(); ++s) {
    proto::ConfigureRequest c;
    c.set_shard_index(s);
    c.set_num_shards(servers_->num_shards());
    *c.mutable_policy() = job_->policy();
    *c.mutable_optimizer() = job_->optimizer();
    c.set_num_workers(num_workers_);
    c.set_job_id(job_->job_id());
    PSC_RETURN_IF_ERROR(servers_->Configure(s, c));
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> ShardControl::InitializeOrRestore(const std::string& checkpoint_dir) {
  if (!checkpoint_dir.empty()) {
    std::vector<int64_t> steps;
    for (int s = 0; s < servers_->num_shards(); ++s) {
      proto::RestoreCheckpointRequest req;
      req.set_directory(checkpoint_dir);
      req.set_step(-1);
      proto::RestoreCheckpointResponse resp;
      absl::Status st = servers_->RestoreCheckpoint(s, req, &resp);
      if (st.ok()) {
        PSC_RETURN_IF_ERROR(placement::CheckSamePlacement(resp.placement(), job_->placement()));
        steps.push_back(resp.step());
      } else if (absl::IsNotFound(st)) {
        steps.push_back(-1);
      } else {
        return st;
      }
    }
    if (steps[0] >= 0) {
      if (std::any_of(steps.begin(), steps.end(), [&](int64_t x) { return x != steps[0]; })) {
        return absl::DataLossError(absl::StrCat("the shards' latest checkpoints in ",
                                                checkpoint_dir, " are of different steps"));
      }
      base::Logf("chief: restored every shard from %s step %d", checkpoint_dir, steps[0]);
      return steps[0];
    }
  }
  std::vector<std::vector<proto::NamedTensor>> split;
  sharded_->Split(model_->Initialize(job_->seed()), &split);
  for (int s = 0; s < servers_->num_shards(); ++s) {
    proto::CreateVariablesRequest req;
    for (auto& t : split[s]) *req.add_variables() = std::move(t);
    PSC_RETURN_IF_ERROR(servers_->CreateVariables(s, req));
  }
  return 0;
}

absl::StatusOr<int64_t> ShardControl::RestoreLatest(const std::string& checkpoint_dir) {
  int64_t step = -1;
  for (int s = 0; s < servers_->num_shards(); ++s) {
    proto::RestoreCheckpointRequest req;
    req.set_directory(checkpoint_dir);
    req.set_step(-1);
    proto::RestoreCheckpointResponse resp;
    if (absl::Status st = servers_->RestoreCheckpoint(s, req, &resp); !st.ok()) {
      return absl::Status(st.code(), absl::StrCat("recovering the servers: ", st.message()));
    }
    if (step >= 0 && resp.step() != step) {
      return absl::DataLossError("the shards' latest checkpoints are of different steps");
    }
    step = resp.step();
  }
  return step;
}

absl::Status ShardControl::Checkpoint(const std::string& checkpoint_dir, int64_t step) {
  for (int s = 0; s < servers_->num_shards(); ++s) {
    proto::SaveCheckpointRequest req;
    req.set_directory(checkpoint_dir);
    req.set_step(step);
    *req.mutable_placement() = job_->placement();
    proto::SaveCheckpointResponse resp;
    PSC_RETURN_IF_ERROR(servers_->SaveCheckpoint(s, req, &resp));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::vector<float>>> ShardControl::PullAll(absl::Duration timeout) {
  std::vector<proto::PullRequest> requests(servers_->num_shards());
  std::vector<proto::PullResponse> responses;
  PSC_RETURN_IF_ERROR(servers_->PullAll(requests, &responses, timeout));
  std::vector<const google::protobuf::RepeatedPtrField<proto::NamedTensor>*> parts;
  for (const auto& r : responses) parts.push_back(&r.variables());
  std::vector<std::vector<float>> params;
  PSC_RETURN_IF_ERROR(sharded_->Assemble(parts, &params));
  return params;
}

absl::Status ShardControl::CloseOpenStep() {
  for (int s = 0; s < servers_->num_shards(); ++s) {
    proto::UpdateMembershipRequest close;
    close.set_partial(proto::UpdateMembershipRequest::DISCARD);
    proto::UpdateMembershipResponse closed;
    PSC_RETURN_IF_ERROR(servers_->UpdateMembership(s, close, &closed));
  }
  return absl::OkStatus();
}

}  // namespace chief
}  // namespace psc
