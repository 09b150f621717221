#include "worker/worker_parameters.h"

#include "common/base/status_macros.h"
#include "common/optimizer/loss_scale.h"
#include "common/ps_client/row_tables.h"
#include "common/tensor/tensor.h"
#include "worker/divergence.h"

namespace psc {
namespace worker {

WorkerParameters::WorkerParameters(const proto::JobSpec* job, int worker_index,
                                   ps_client::ParameterClient* client,
                                   const ps_client::ShardedParameters* sharded, bool embedded)
    : job_(job),
      worker_index_(worker_index),
      client_(client),
      sharded_(sharded),
      embedded_(embedded),
      versions_(client->num_shards(), 0) {}

absl::Status WorkerParameters::Pull(int64_t step) {
  std::vector<proto::PullRequest> requests(client_->num_shards());
  for (auto& r : requests) {
    // An embedded replica is checked instead of waited for (the exchange).
    if (job_->policy().mode() == proto::MODE_SYNC && !embedded_) r.set_min_version(step);
    r.set_worker(worker_index_);
    r.set_worker_clock(step);
    r.set_starts_unit(true);  // ssp: the worker runs from this step
    r.set_wire_dtype(job_->policy().wire_dtype());
    r.set_skip_frozen(frozen_held_);
    r.set_skip_row_sparse(tables_ != nullptr);
  }
  std::vector<proto::PullResponse> responses;
  PSC_RETURN_IF_ERROR(client_->PullAll(requests, &responses, kStepTimeout));
  std::vector<const google::protobuf::RepeatedPtrField<proto::NamedTensor>*> parts;
  versions_.clear();
  for (const auto& r : responses) {
    parts.push_back(&r.variables());
    versions_.push_back(r.version());
  }
  TakeLossScale(responses[0].loss_scale());
  PSC_RETURN_IF_ERROR(Assemble(parts));
  have_ = true;
  frozen_held_ = true;
  return absl::OkStatus();
}

bool WorkerParameters::Reuse(int64_t first_step) {
  // A unit that failed midway leaves values_ of an unknown version: only a
  // unit that ended cleanly at this step lets the next one skip the pull.
  // An embedded replica is local (a pull costs a copy) and may have been
  // replaced by a peer's state since: always pull.
  const bool reuse =
      have_ && job_->policy().mode() == proto::MODE_SYNC && next_step_ == first_step && !embedded_;
  have_ = false;
  next_step_ = -1;
  return reuse;
}

void WorkerParameters::Ended(int64_t end) {
  have_ = true;
  next_step_ = end;
}

void WorkerParameters::Failed() {
  have_ = false;
  next_step_ = -1;
  frozen_held_ = false;  // the next pull brings them again
}

void WorkerParameters::PushHeader(const proto::RunUnitRequest& unit, int64_t step, int identity,
                                  proto::DataType wire, int shard, proto::PushRequest* p) const {
  p->Clear();
  // To an embedded replica the push is the step's one gradient: always
  // worker 0, slot 0 of 1.
  p->mutable_id()->set_worker(embedded_ ? 0 : identity);
  p->mutable_id()->set_unit(unit.unit());
  p->mutable_id()->set_step(step);
  p->mutable_id()->set_replica_slot(embedded_ ? 0 : unit.replica_slot());
  p->set_computed_on_version(versions_[shard]);
  p->set_worker_clock(step + 1);
  // ssp: the clock is the pushing worker's, and the unit's last step ends
  // its running.
  if (!embedded_ && identity != worker_index_) p->set_clock_worker(worker_index_);
  p->set_ends_unit(step + 1 >= unit.first_step() + unit.num_steps());
  p->set_pull_after(true);
  p->set_pull_wire_dtype(wire);
  p->set_pull_skip_frozen(frozen_held_);
  p->set_pull_skip_row_sparse(tables_ != nullptr);
  if (job_->policy().mode() == proto::MODE_SYNC) p->set_pull_min_version(step + 1);
}

absl::Status WorkerParameters::TakeReplies(const std::vector<proto::PushResponse>& replies) {
  std::vector<const google::protobuf::RepeatedPtrField<proto::NamedTensor>*> parts;
  for (size_t shard = 0; shard < replies.size(); ++shard) {
    parts.push_back(&replies[shard].variables());
    versions_[shard] = replies[shard].version();
  }
  if (!replies.empty()) TakeLossScale(replies[0].loss_scale());
  return Assemble(parts);
}

absl::Status WorkerParameters::Assemble(
    const std::vector<const google::protobuf::RepeatedPtrField<proto::NamedTensor>*>& parts) {
  if (tables_ == nullptr) return sharded_->Assemble(parts, &values_, frozen_held_);
  return sharded_->AssembleVariables(parts, tables_->dense_variables(), &values_, frozen_held_);
}

std::string WorkerParameters::RefusalReport(double loss_sum) const {
  if (job_->policy().skip_nonfinite()) return "";  // the servers skip them
  // Under loss scaling a gradient that overflowed is a step to skip.
  if (job_->policy().has_loss_scale()) return NonFiniteReport(loss_sum, {}, {});
  return NonFiniteReport(loss_sum, grads_, sharded_->variables());
}

void WorkerParameters::TakeLossScale(double scale) {
  // 0: a reply without one (a shard of a job without loss scaling).
  if (job_->policy().has_loss_scale() && scale > 0) loss_scale_ = static_cast<float>(scale);
}

absl::StatusOr<bool> WorkerParameters::UnscaleGradients(const std::vector<bool>& trainable,
                                                        int identity, int64_t step) {
  if (!job_->policy().has_loss_scale()) return false;
  const float used = loss_scale_;
  const bool overflow = !optimizer::UnscaleGradients(used, trainable, &grads_);
  if (overflow && used <= optimizer::kMinLossScale) {
    return DivergedError(identity, step, OverflowAtTheSmallestScale(),
                         job_->optimizer().learning_rate(), absl::OkStatus());
  }
  return overflow;
}

absl::Status WorkerParameters::CheckFinite(double loss_sum, int identity, int64_t step,
                                           const absl::Status& pushed) const {
  const std::string report = RefusalReport(loss_sum);
  if (report.empty()) return absl::OkStatus();
  return DivergedError(identity, step, report, job_->optimizer().learning_rate(), pushed);
}

void WorkerParameters::SizeGradients() {
  grads_.resize(sharded_->variables().size());
  for (size_t v = 0; v < grads_.size(); ++v) {
    grads_[v].assign(tensor::NumElements(sharded_->variables()[v].shape), 0.0f);
  }
}

}  // namespace worker
}  // namespace psc
