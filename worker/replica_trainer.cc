#include "worker/replica_trainer.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"
#include "common/data/prefetcher.h"
#include "common/job/job_data.h"
#include "common/job/job_model.h"
#include "worker/replica_backends.h"

namespace psc {
namespace worker {

absl::StatusOr<std::unique_ptr<ReplicaTrainer>> ReplicaTrainer::Create(
    const proto::JobSpec& job, int worker_index, ps_client::ParameterClient* client,
    const DeviceSetup& devices, base::Clock* clock) {
  std::unique_ptr<ReplicaTrainer> t(new ReplicaTrainer());
  t->job_ = job;
  t->worker_index_ = worker_index;
  t->client_ = client;
  if (clock != nullptr) t->clock_ = clock;
  PSC_ASSIGN_OR_RETURN(auto model, job::ModelForJob(job));
  t->model_ = std::make_unique<compute::Model>(std::move(model));
  PSC_ASSIGN_OR_RETURN(job::JobData data, job::LoadJobData(job, *t->model_));
  t->data_ = std::move(data.splits);
  // A cluster worker only trains: the chief evaluates.
  t->data_.validation = data::Split();
  t->data_.test = data::Split();
  data::BatchPlanOptions plan_options;
  plan_options.num_examples = t->data_.train.count;
  plan_options.batch_size = job.batch_size();
  plan_options.seed = job.seed();
  plan_options.steps_per_epoch = job.steps_per_epoch();
  PSC_ASSIGN_OR_RETURN(auto plan, data::BatchPlan::Create(plan_options));
  t->plan_ = std::make_unique<data::BatchPlan>(std::move(plan));
  // The most examples one local replica gets: the worker's slot of the
  // batch, split over its devices.
  const int64_t slots = std::max<int64_t>(1, job.num_replicas());
  const int64_t local = std::max<int64_t>(1, static_cast<int64_t>(devices.plan.devices.size()));
  const int64_t replica_batch = ((job.batch_size() + slots - 1) / slots + local - 1) / local;
  PSC_ASSIGN_OR_RETURN(auto replicas, CreateReplicas(devices, t->model_.get(),
                                                     job.intra_op_threads(), replica_batch));
  PSC_RETURN_IF_ERROR(replicas->Prepare(job.batch_size() / slots));
  t->replicas_ = std::move(replicas);
  PSC_ASSIGN_OR_RETURN(
      auto sharded, ps_client::ShardedParameters::Create(job.placement(), t->model_->variables()));
  t->sharded_ = std::make_unique<ps_client::ShardedParameters>(std::move(sharded));
  if (t->sharded_->num_shards() != client->num_shards()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the job places variables on ", t->sharded_->num_shards(),
                     " shards; the cluster has ", client->num_shards()));
  }
  return t;
}

absl::Status ReplicaTrainer::Pull(int64_t step) {
  std::vector<proto::PullRequest> requests(client_->num_shards());
  for (auto& r : requests) {
    if (job_.policy().mode() == proto::MODE_SYNC) r.set_min_version(step);
    r.set_worker(worker_index_);
    r.set_worker_clock(step);
  }
  std::vector<proto::PullResponse> responses;
  PSC_RETURN_IF_ERROR(client_->PullAll(requests, &responses, kStepTimeout));
  std::vector<const google::protobuf::RepeatedPtrField<proto::NamedTensor>*> parts;
  versions_.clear();
  for (const auto& r : responses) {
    parts.push_back(&r.variables());
    versions_.push_back(r.version());
  }
  PSC_RETURN_IF_ERROR(sharded_->Assemble(parts, &params_));
  have_params_ = true;
  return absl::OkStatus();
}

absl::StatusOr<proto::UnitMetrics> ReplicaTrainer::RunUnit(
    const proto::RunUnitRequest& unit, const std::function<bool()>& cancelled,
    const std::function<void(int64_t)>& step_done) {
  if (unit.first_step() < 0 || unit.num_steps() < 0 || unit.num_slots() < 1 ||
      unit.replica_slot() < 0 || unit.replica_slot() >= unit.num_slots() ||
      job_.batch_size() % unit.num_slots() != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad unit: steps ", unit.first_step(), "+", unit.num_steps(), ", slot ",
                     unit.replica_slot(), " of ", unit.num_slots(), " (the batch of ",
                     job_.batch_size(), " must split evenly over the slots)"));
  }
  const proto::TrainingMode mode = job_.policy().mode();
  // A lost worker's unit handed over: push under its identity (exactly once).
  const int identity = unit.has_push_as_worker() ? unit.push_as_worker() : worker_index_;
  const float grad_scale =
      static_cast<float>(unit.num_slots()) / static_cast<float>(job_.batch_size());
  proto::UnitMetrics metrics;
  absl::Duration compute_time, comm_time;
  const int64_t end = unit.first_step() + unit.num_steps();
  // The parameters of the unit's first step: in sync exactly that version.
  // A unit that failed midway leaves params_ of an unknown version: only a
  // unit that ended cleanly at this step lets the next one skip the pull.
  const bool reuse = have_params_ && mode == proto::MODE_SYNC && next_step_ == unit.first_step();
  have_params_ = false;
  next_step_ = -1;
  if (!reuse) {
    const absl::Time t0 = clock_->Now();
    PSC_RETURN_IF_ERROR(Pull(unit.first_step()));
    comm_time += clock_->Now() - t0;
  }
  data::Prefetcher prefetcher(&data_.train, plan_.get(), unit.first_step(), unit.num_steps(),
                              unit.replica_slot(), unit.num_slots(), 2);
  std::vector<std::vector<proto::NamedTensor>> split;
  std::vector<proto::PushRequest> pushes(client_->num_shards());
  std::vector<proto::PushResponse> replies;
  for (int64_t step = unit.first_step(); step < end; ++step) {
    if (cancelled && cancelled()) return absl::CancelledError("unit cancelled");
    PSC_ASSIGN_OR_RETURN(auto batch, prefetcher.Next());
    const absl::Time t0 = clock_->Now();
    PSC_RETURN_IF_ERROR(replicas_->SetParameters(params_));
    compute::StepResult r;
    // The slot's share of the step's batch starts at slot * (batch / slots).
    replicas_->SetDropoutKey(job_.seed(), step,
                             unit.replica_slot() * (job_.batch_size() / unit.num_slots()));
    PSC_RETURN_IF_ERROR(replicas_->ComputeGradients(batch.images, batch.labels, grad_scale, &r));
    PSC_RETURN_IF_ERROR(replicas_->CopyGradients(&grads_));
    sharded_->Split(grads_, &split);
    const absl::Time t1 = clock_->Now();
    for (int shard = 0; shard < client_->num_shards(); ++shard) {
      proto::PushRequest& p = pushes[shard];
      p.Clear();
      p.mutable_id()->set_worker(identity);
      p.mutable_id()->set_unit(unit.unit());
      p.mutable_id()->set_step(step);
      p.mutable_id()->set_replica_slot(unit.replica_slot());
      p.set_computed_on_version(versions_[shard]);
      p.set_worker_clock(step + 1);
      for (auto& t : split[shard]) *p.add_gradients() = std::move(t);
      p.set_pull_after(true);
      if (mode == proto::MODE_SYNC) p.set_pull_min_version(step + 1);
    }
    PSC_RETURN_IF_ERROR(client_->PushAll(pushes, &replies, kStepTimeout));
    std::vector<const google::protobuf::RepeatedPtrField<proto::NamedTensor>*> parts;
    for (int shard = 0; shard < client_->num_shards(); ++shard) {
      parts.push_back(&replies[shard].variables());
      versions_[shard] = replies[shard].version();
    }
    PSC_RETURN_IF_ERROR(sharded_->Assemble(parts, &params_));
    comm_time += clock_->Now() - t1;
    compute_time += t1 - t0;
    metrics.set_loss_sum(metrics.loss_sum() + r.loss_sum);
    metrics.set_correct(metrics.correct() + r.correct);
    metrics.set_examples(metrics.examples() + r.examples);
    if (!logged_algorithms_) {  // once, after the first step has chosen them
      LogConvAlgorithms(*replicas_);
      logged_algorithms_ = true;
    }
    if (step_done) step_done(step);
  }
  have_params_ = true;
  next_step_ = end;
  metrics.set_compute_seconds(absl::ToDoubleSeconds(compute_time));
  metrics.set_comm_seconds(absl::ToDoubleSeconds(comm_time));
  return metrics;
}

}  // namespace worker
}  // namespace psc
