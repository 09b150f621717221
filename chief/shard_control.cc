#include "chief/shard_control.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/base/logging.h"
#include "common/base/status_context.h"
#include "common/base/status_macros.h"
#include "common/job/job_model.h"
#include "common/optimizer/optimizer.h"
#include "common/placement/placement.h"
#include "common/tensor/initializer_spec.h"
#include "proto/checkpoint.pb.h"

namespace psc {
namespace chief {

std::vector<std::vector<proto::MovingAverage>> ShardMovingAverages(
    const proto::Placement& placement, const std::vector<std::optional<float>>& moving_averages) {
  std::vector<std::vector<proto::MovingAverage>> out(std::max(0, placement.num_shards()));
  const size_t n =
      std::min(moving_averages.size(), static_cast<size_t>(placement.variables_size()));
  for (size_t v = 0; v < n; ++v) {
    if (!moving_averages[v].has_value()) continue;
    for (const auto& part : placement.variables(static_cast<int>(v)).parts()) {
      if (part.shard() < 0 || part.shard() >= placement.num_shards()) continue;
      proto::MovingAverage& ma = out[part.shard()].emplace_back();
      ma.set_variable(part.shard_variable());
      ma.set_momentum(*moving_averages[v]);
    }
  }
  return out;
}

std::vector<std::vector<proto::GradientDeclaration>> ShardGradientDeclarations(
    const proto::Placement& placement) {
  std::vector<std::vector<proto::GradientDeclaration>> out(std::max(0, placement.num_shards()));
  for (const proto::VariablePlacement& v : placement.variables()) {
    if (v.gradient() == proto::GRADIENT_DENSE && !v.pull_float32()) continue;
    for (const auto& part : v.parts()) {
      if (part.shard() < 0 || part.shard() >= placement.num_shards()) continue;
      proto::GradientDeclaration& d = out[part.shard()].emplace_back();
      d.set_variable(part.shard_variable());
      d.set_encoding(v.gradient());
      d.set_pull_float32(v.pull_float32());
    }
  }
  return out;
}

absl::Status ShardControl::ConfigureAll() {
  const std::vector<std::vector<proto::GradientDeclaration>> declared =
      ShardGradientDeclarations(job_->placement());
  for (int s = 0; s < servers_->num_shards(); ++s) {
    proto::ConfigureRequest c;
    c.set_shard_index(s);
    c.set_num_shards(servers_->num_shards());
    *c.mutable_policy() = job_->policy();
    *c.mutable_optimizer() = job_->optimizer();
    c.set_num_workers(num_workers_);
    if (initial_workers_ < num_workers_) {
      proto::UpdatePolicy* p = c.mutable_policy();
      p->clear_live_workers();
      for (int w = 0; w < initial_workers_; ++w) p->add_live_workers(w);
      if (p->mode() == proto::MODE_SYNC && p->replicas_to_aggregate() == 0) {
        p->set_replicas_to_aggregate(initial_workers_);
      }
    }
    c.set_job_id(job_->job_id());
    if (static_cast<size_t>(s) < declared.size()) {
      for (const auto& d : declared[s]) *c.add_gradients() = d;
    }
    PSC_RETURN_IF_ERROR(servers_->Configure(s, c));
  }
  return absl::OkStatus();
}

std::vector<bool> GeneratedTables(const compute::Model& model) {
  std::vector<bool> tables = model.table_variables();
  const auto& moving = model.moving_averages();
  for (size_t v = 0; v < tables.size(); ++v) {
    if (v < moving.size() && moving[v].has_value()) tables[v] = false;  // frozen
  }
  return tables;
}

std::vector<std::vector<proto::GeneratedVariable>> ShardGeneratedTables(
    const proto::Placement& placement, const compute::Model& model, uint64_t seed) {
  std::vector<std::vector<proto::GeneratedVariable>> out(std::max(0, placement.num_shards()));
  const std::vector<bool> tables = GeneratedTables(model);
  for (int v = 0; v < placement.variables_size() && v < static_cast<int>(tables.size()); ++v) {
    if (!tables[v]) continue;
    const proto::VariablePlacement& vp = placement.variables(v);
    for (const proto::VariablePlacement::Part& part : vp.parts()) {
      if (part.shard() < 0 || part.shard() >= placement.num_shards()) continue;
      proto::GeneratedVariable g;
      g.set_name(part.shard_variable());
      *g.mutable_variable_shape() = vp.shape();
      *g.mutable_shape() = vp.shape();
      g.set_shape(0, part.first_axis_size());
      g.set_first_row(part.first_axis_offset());
      g.set_seed(seed);
      g.set_index(v);
      *g.mutable_initializer() = tensor::ToProto(model.initializers()[v]);
      out[part.shard()].push_back(std::move(g));
    }
  }
  return out;
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
        if (s == 0) restored_worker_state_ = resp.worker_state();
        steps.push_back(resp.step());
      } else if (absl::IsNotFound(st)) {
        steps.push_back(-1);
      } else {
        return st;
      }
    }
    if (std::any_of(steps.begin(), steps.end(), [](int64_t x) { return x >= 0; })) {
      PSC_ASSIGN_OR_RETURN(const int64_t step, RestoreCommonStep(checkpoint_dir, steps));
      base::Logf("chief: restored every shard from %s step %d", checkpoint_dir, step);
      return step;
    }
  }
  restored_worker_state_.Clear();
  std::vector<std::vector<proto::NamedTensor>> split;
  // From the seed, the embedding tables' rows are made by their servers
  // (ShardGeneratedTables): the chief never holds a whole table.
  std::vector<std::vector<proto::GeneratedVariable>> generated(servers_->num_shards());
  if (job_->initial_weights().empty()) {
    sharded_->Split(model_->Initialize(job_->seed(), GeneratedTables(*model_)), &split);
    generated = ShardGeneratedTables(job_->placement(), *model_, job_->seed());
  } else {
    PSC_ASSIGN_OR_RETURN(const std::vector<std::vector<float>> initial,
                         job::InitialParameters(*job_, *model_));
    sharded_->Split(initial, &split);
  }
  std::vector<std::vector<proto::MovingAverage>> moving =
      ShardMovingAverages(job_->placement(), model_->moving_averages());
  for (int s = 0; s < servers_->num_shards(); ++s) {
    proto::CreateVariablesRequest req;
    for (auto& t : split[s]) *req.add_variables() = std::move(t);
    if (static_cast<size_t>(s) < generated.size()) {
      for (auto& g : generated[s]) *req.add_generated() = std::move(g);
    }
    if (static_cast<size_t>(s) < moving.size()) {
      for (auto& ma : moving[s]) *req.add_moving_averages() = std::move(ma);
    }
    PSC_RETURN_IF_ERROR(servers_->CreateVariables(s, req));
  }
  return 0;
}

absl::StatusOr<int64_t> ShardControl::RestoreLatest(const std::string& checkpoint_dir) {
  std::vector<int64_t> steps;
  for (int s = 0; s < servers_->num_shards(); ++s) {
    proto::RestoreCheckpointRequest req;
    req.set_directory(checkpoint_dir);
    req.set_step(-1);
    proto::RestoreCheckpointResponse resp;
    if (absl::Status st = servers_->RestoreCheckpoint(s, req, &resp); !st.ok()) {
      return base::Prefix(st, "recovering the servers");
    }
    if (s == 0) restored_worker_state_ = resp.worker_state();
    steps.push_back(resp.step());
  }
  return RestoreCommonStep(checkpoint_dir, steps);
}

absl::StatusOr<int64_t> ShardControl::RestoreCommonStep(const std::string& checkpoint_dir,
                                                        const std::vector<int64_t>& latest) {
  // A shard that died while the others saved a step has an older latest
  // checkpoint: the newest step every shard has is the oldest latest one.
  const int64_t step = *std::min_element(latest.begin(), latest.end());
  if (step < 0) {
    return absl::DataLossError(absl::StrCat("some shards have a checkpoint in ", checkpoint_dir,
                                            " and others none: no step to restore them all to"));
  }
  for (int s = 0; s < servers_->num_shards(); ++s) {
    if (latest[s] == step) continue;
    base::Logf(
        "chief: ps:%d's latest checkpoint is step %d, but not every shard has it; "
        "restoring step %d",
        s, latest[s], step);
    proto::RestoreCheckpointRequest req;
    req.set_directory(checkpoint_dir);
    req.set_step(step);
    proto::RestoreCheckpointResponse resp;
    if (absl::Status st = servers_->RestoreCheckpoint(s, req, &resp); !st.ok()) {
      return base::Prefix(st, absl::StrCat("restoring ps:", s, " to step ", step,
                                           ", the newest step every shard has"));
    }
    if (s == 0) restored_worker_state_ = resp.worker_state();
  }
  return step;
}

absl::Status ShardControl::Checkpoint(const std::string& checkpoint_dir, int64_t step,
                                      const proto::ErrorFeedbackState& worker_state) {
  for (int s = 0; s < servers_->num_shards(); ++s) {
    proto::SaveCheckpointRequest req;
    req.set_directory(checkpoint_dir);
    req.set_step(step);
    *req.mutable_placement() = job_->placement();
    if (s == 0) *req.mutable_worker_state() = worker_state;
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
