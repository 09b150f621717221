#include "worker/replica_trainer.h"

#include <algorithm>
#include <optional>
#include <set>

#include "absl/strings/str_cat.h"
#include "common/base/logging.h"
#include "common/base/status_macros.h"
#include "common/data/prefetcher.h"
#include "common/job/compiled_metrics.h"
#include "common/job/job_data.h"
#include "common/job/job_loss.h"
#include "common/job/job_model.h"
#include "common/job/record_stream.h"
#include "common/job/step_batch.h"
#include "worker/overlapped_exchange.h"
#include "worker/replica_backends.h"
#include "worker/whole_push_exchange.h"

namespace psc {
namespace worker {

absl::StatusOr<std::unique_ptr<ReplicaTrainer>> ReplicaTrainer::Create(
    const proto::JobSpec& job, int worker_index, ps_client::ParameterClient* client,
    const DeviceSetup& devices, base::Clock* clock, const CollectiveSetup* collective_setup) {
  std::unique_ptr<ReplicaTrainer> t(new ReplicaTrainer());
  t->job_ = job;
  t->worker_index_ = worker_index;
  t->client_ = client;
  if (clock != nullptr) t->clock_ = clock;
  PSC_ASSIGN_OR_RETURN(auto model, job::ModelForJob(job));
  t->model_ = std::make_unique<compute::Model>(std::move(model));
  // A cluster worker only trains: the chief evaluates (data files'
  // validation and test splits are not even read).
  PSC_ASSIGN_OR_RETURN(job::JobData data, job::LoadTrainingData(job, *t->model_));
  t->data_ = std::move(data.splits);
  t->data_.validation = data::Split();
  t->data_.test = data::Split();
  // With backup workers a step reads more than the batch (step_batch.h).
  const int64_t read = job::ExamplesReadPerStep(job);
  // Streamed data files: each slot reads its shards (record_stream.h).
  PSC_ASSIGN_OR_RETURN(t->stream_, job::SlotBatches::ForJob(job, *t->model_, data, read));
  data::BatchPlanOptions plan_options;
  plan_options.num_examples = t->data_.train.count;
  plan_options.batch_size = read;
  plan_options.seed = job.seed();
  plan_options.steps_per_epoch = job.steps_per_epoch();
  if (job.no_shuffle()) plan_options.shuffle_buffer = 1;  // fit(shuffle=False): in order
  PSC_ASSIGN_OR_RETURN(auto plan, data::BatchPlan::Create(plan_options));
  t->plan_ = std::make_unique<data::BatchPlan>(std::move(plan));
  // The most examples one local replica gets: the worker's slot of the
  // batch, split over its devices.
  const int64_t slots = std::max<int64_t>(1, job.num_replicas());
  const int64_t local = std::max<int64_t>(1, static_cast<int64_t>(devices.plan.devices.size()));
  const int64_t replica_batch = ((read + slots - 1) / slots + local - 1) / local;
  // Tables trained row by row: the replicas compute with local tables of
  // the step's rows (row_tables.h).
  PSC_ASSIGN_OR_RETURN(t->tables_, ps_client::RowTables::Create(*t->model_, job.placement(),
                                                                (read + slots - 1) / slots));
  const compute::Model* computed = t->model_.get();
  if (t->tables_ != nullptr) {
    PSC_ASSIGN_OR_RETURN(compute::Model local, t->tables_->LocalModel(*t->model_));
    t->local_model_ = std::make_unique<compute::Model>(std::move(local));
    computed = t->local_model_.get();
  }
  PSC_ASSIGN_OR_RETURN(auto replicas,
                       CreateReplicas(devices, computed, job.intra_op_threads(), replica_batch,
                                      job::CpuOptionsForJob(job, 0).conv));
  PSC_RETURN_IF_ERROR(replicas->Prepare(read / slots));
  t->replicas_ = std::move(replicas);
  ExchangeContext context;
  const std::vector<compute::LayerVariables>& layers = t->model_->layer_variables();
  for (int i = static_cast<int>(layers.size()) - 1; i >= 0; --i) {
    for (int v : compute::LayerVariableIndices(layers[i])) context.ready_order.push_back(v);
  }
  context.trainable = t->model_->trainable_variables();
  PSC_ASSIGN_OR_RETURN(auto sharded,
                       ps_client::ShardedParameters::Create(job.placement(), t->model_->variables(),
                                                            t->model_->frozen_variables()));
  t->sharded_ = std::make_unique<ps_client::ShardedParameters>(std::move(sharded));
  if (t->sharded_->num_shards() != client->num_shards()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the job places variables on ", t->sharded_->num_shards(),
                     " shards; the cluster has ", client->num_shards()));
  }
  const bool collective = job.strategy() == proto::MULTI_WORKER_MIRRORED;
  if (job.policy().topk_ratio() > 0 && !collective) {
    PSC_ASSIGN_OR_RETURN(t->topk_,
                         TopKCompressor::Create(job.policy().topk_ratio(), job.placement()));
  }
  t->params_ = std::make_unique<WorkerParameters>(&t->job_, worker_index, client, t->sharded_.get(),
                                                  collective);
  t->params_->set_row_tables(t->tables_.get());
  context.job = &t->job_;
  context.worker_index = worker_index;
  context.model = t->model_.get();
  context.replicas = t->replicas_.get();
  context.client = client;
  context.sharded = t->sharded_.get();
  context.params = t->params_.get();
  context.topk = t->topk_.get();
  context.tables = t->tables_.get();
  context.clock = t->clock_;
  if (collective) {
    PSC_ASSIGN_OR_RETURN(t->exchange_,
                         CollectiveExchange::Create(std::move(context), collective_setup));
  } else if (job.push().overlap() && t->replicas_->size() == 1) {
    PSC_ASSIGN_OR_RETURN(t->exchange_, OverlappedExchange::Create(std::move(context)));
  } else {
    if (job.push().overlap()) {
      // The hooks are one executor's; several are combined after the pass.
      base::Logf("worker %d: --overlap needs one local replica; this worker has %d: whole pushes",
                 worker_index, t->replicas_->size());
    }
    t->exchange_ = std::make_unique<WholePushExchange>(std::move(context));
  }
  return t;
}

absl::Duration ReplicaTrainer::collective_timeout() const {
  if (job_.strategy() != proto::MULTI_WORKER_MIRRORED) return absl::ZeroDuration();
  return CollectiveExchange::Timeout(job_);
}

absl::StatusOr<proto::UnitMetrics> ReplicaTrainer::RunUnit(const proto::RunUnitRequest& unit,
                                                           const std::function<bool()>& cancelled,
                                                           const StepDone& step_done) {
  absl::StatusOr<proto::UnitMetrics> metrics = RunSteps(unit, cancelled, step_done);
  if (!metrics.ok()) exchange_->FailUnit();
  return metrics;
}

absl::StatusOr<proto::UnitMetrics> ReplicaTrainer::RunSteps(const proto::RunUnitRequest& unit,
                                                            const std::function<bool()>& cancelled,
                                                            const StepDone& step_done) {
  if (unit.first_step() < 0 || unit.num_steps() < 0 || unit.num_slots() < 1 ||
      unit.replica_slot() < 0 || unit.replica_slot() >= unit.num_slots() ||
      job::ExamplesReadPerStep(job_) % unit.num_slots() != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "bad unit: steps ", unit.first_step(), "+", unit.num_steps(), ", slot ",
        unit.replica_slot(), " of ", unit.num_slots(), " (the step's ",
        job::ExamplesReadPerStep(job_), " examples must split evenly over the slots)"));
  }
  const bool collective = job_.strategy() == proto::MULTI_WORKER_MIRRORED;
  // The examples a step reads, and this slot's share of them.
  const int64_t read = job::ExamplesReadPerStep(job_);
  const int64_t share = read / unit.num_slots();
  // A backup worker late for a step goes on at the servers' step.
  const bool backups = job::HasBackupWorkers(job_);
  // A lost worker's unit handed over: push under its identity (exactly once).
  const int identity = unit.has_push_as_worker() ? unit.push_as_worker() : worker_index_;
  // Per replica slot its share's mean (the servers average the slots); in
  // a group, each member's part of the global batch's mean (the all-reduce
  // sums them).
  const float mean_scale = collective
                               ? 1.0f / static_cast<float>(job_.batch_size())
                               : static_cast<float>(unit.num_slots()) / static_cast<float>(read);
  // Under reduction="sum" the step applies the sum over its examples: an
  // all-reduce sums, a sync step's servers average the gradients they
  // aggregate (so each is scaled by their number), an async push is applied
  // alone.
  const float sum_scale =
      collective || job_.policy().mode() != proto::MODE_SYNC
          ? 1.0f
          : static_cast<float>(backups ? job::ReplicasToAggregate(job_) : unit.num_slots());
  const job::JobLoss loss_kind(job_);
  // The compiled metrics of the unit's training batches (Keras's running
  // training metrics), from the model's outputs of each step.
  job::MetricSums metric_sums({job_.metrics().begin(), job_.metrics().end()});
  std::vector<float> outputs;
  proto::UnitMetrics metrics;
  metrics.set_straggler_factor(straggler_factor_);
  ExchangeTimes times;
  // The times already reported to step_done: each sample carries what
  // accrued since the last one (the unit's first pull goes with step 1),
  // so the samples add up to the unit's metrics.
  ExchangeTimes told;
  PSC_RETURN_IF_ERROR(TakeErrorFeedback(unit, identity));
  PSC_RETURN_IF_ERROR(exchange_->BeginUnit(unit, cancelled, &times));
  const int64_t end = unit.first_step() + unit.num_steps();
  std::optional<data::Prefetcher> prefetcher;
  if (stream_ != nullptr) {
    const int r = unit.replica_slot(), R = unit.num_slots();
    prefetcher.emplace(
        [stream = stream_.get(), r, R](int64_t step, const std::atomic<bool>& stop) {
          return stream->Batch(step, r, R, &stop);
        },
        unit.first_step(), unit.num_steps(), 2);
  } else {
    prefetcher.emplace(&data_.train, plan_.get(), unit.first_step(), unit.num_steps(),
                       unit.replica_slot(), unit.num_slots(), 2);
  }
  int64_t fetched = unit.first_step();  // the step prefetcher->Next() returns
  for (int64_t step = unit.first_step(); step < end;) {
    if (cancelled && cancelled()) return absl::CancelledError("unit cancelled");
    // A backup that missed steps skips their batches (their slices of this
    // slot are dropped, as its late gradients were).
    for (; fetched < step; ++fetched) PSC_RETURN_IF_ERROR(prefetcher->Next().status());
    const absl::Time asked = clock_->Now();
    PSC_ASSIGN_OR_RETURN(auto batch, prefetcher->Next());
    metrics.set_data_wait_seconds(metrics.data_wait_seconds() +
                                  absl::ToDoubleSeconds(clock_->Now() - asked));
    ++fetched;
    const absl::Time t0 = clock_->Now();
    const compute::LossOptions step_loss =
        loss_kind.Step(mean_scale, sum_scale, batch.weights, batch.targets);
    ExchangeStep x;
    x.step = step;
    x.end = end;
    x.identity = identity;
    x.unit = &unit;
    x.cancelled = &cancelled;
    x.straggler_factor = straggler_factor_;
    x.inputs = &batch.images;
    x.examples = static_cast<int64_t>(batch.labels.size());
    x.per_example = x.examples > 0 ? static_cast<int64_t>(batch.images.size()) / x.examples : 0;
    x.compute = [&](float loss_scale, compute::StepResult* r) {
      // The slot's share of the step's batch starts at slot * (batch / slots).
      replicas_->SetDropoutKey(job_.seed(), step, unit.replica_slot() * share);
      compute::LossOptions scaled = step_loss;
      scaled.grad_scale *= loss_scale;  // dlogits: the scaled loss's
      return replicas_->ComputeGradients(batch.images, batch.labels, scaled, r);
    };
    PSC_ASSIGN_OR_RETURN(const ExchangeResult done, exchange_->Step(x, &times));
    const compute::StepResult& r = done.result;
    metrics.set_loss_sum(metrics.loss_sum() + r.loss_sum);
    metrics.set_correct(metrics.correct() + r.correct);
    if (!metric_sums.empty()) {
      PSC_RETURN_IF_ERROR(replicas_->CopyOutputs(&outputs));
      metric_sums.Add(outputs, batch.labels, model_->classes(), batch.targets);
    }
    metrics.set_examples(metrics.examples() + r.examples);
    metrics.set_steps(metrics.steps() + 1);
    if (done.dropped) metrics.set_examples_dropped(metrics.examples_dropped() + r.examples);
    if (!logged_algorithms_) {  // once, after the first step has chosen them
      LogConvAlgorithms(*replicas_);
      logged_algorithms_ = true;
    }
    if (step_done) {
      StepSample sample;
      sample.step = step;
      sample.examples = r.examples;
      sample.seconds = absl::ToDoubleSeconds(clock_->Now() - t0);
      sample.compute_seconds =
          absl::ToDoubleSeconds((times.compute - told.compute) - (times.exposed - told.exposed));
      sample.comm_seconds = absl::ToDoubleSeconds(times.comm - told.comm);
      sample.idle_seconds = absl::ToDoubleSeconds(times.idle - told.idle);
      told = times;
      step_done(sample);
    }
    // Sync: the servers are at step + 1, or further when this worker was
    // late and the step completed without it (a backup): it goes on there,
    // and a unit the others finished is over for it too.
    step = NextStep(step, done.version, end, backups);
  }
  exchange_->EndUnit(end);
  if (topk_ != nullptr) {
    residual_worker_ = identity;
    residual_step_ = end;
    *metrics.mutable_error_feedback() = topk_->Save(identity, end);
  }
  // Step time = compute (the pass and the apply, less the wait) + the wait.
  metrics.set_compute_seconds(absl::ToDoubleSeconds(times.compute - times.exposed));
  metrics.set_comm_seconds(absl::ToDoubleSeconds(times.comm));
  metrics.set_comm_exposed_seconds(absl::ToDoubleSeconds(times.exposed));
  metrics.set_idle_seconds(absl::ToDoubleSeconds(times.idle));
  metrics.set_examples_skipped((unit.num_steps() - metrics.steps()) * share);
  if (!metric_sums.empty()) *metrics.mutable_metric_sums() = metric_sums.sums();
  prefetcher.reset();        // its thread done (a backup's unit may end before its steps)
  if (stream_ != nullptr) {  // the records skipped since the last unit
    for (const auto& [path, indices] : stream_->skipped()) {
      std::set<int64_t>& told = skipped_told_[path];
      proto::SkippedRecords* out = nullptr;
      for (int64_t index : indices) {
        if (!told.insert(index).second) continue;
        if (out == nullptr) {
          out = metrics.add_records_skipped();
          out->set_path(path);
        }
        out->add_records(index);
      }
    }
  }
  return metrics;
}

absl::Status ReplicaTrainer::TakeErrorFeedback(const proto::RunUnitRequest& unit, int identity) {
  if (topk_ == nullptr) {
    if (!unit.has_error_feedback()) return absl::OkStatus();
    return absl::InvalidArgumentError(
        "the unit brings error-feedback residuals; this job has no --topk_ratio (a unit of "
        "another job's settings)");
  }
  if (unit.has_error_feedback()) {
    const proto::ErrorFeedback& f = unit.error_feedback();
    if (f.worker() != identity || f.step() != unit.first_step()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the unit at step ", unit.first_step(), " pushes as worker ", identity,
          " and brings the error feedback of worker ", f.worker(), " at step ", f.step()));
    }
    PSC_RETURN_IF_ERROR(topk_->Load(f));
  } else if (residual_worker_ != identity || residual_step_ != unit.first_step()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "--topk_ratio: the unit at step ", unit.first_step(), " pushes as worker ", identity,
        " and brings no error feedback; this worker holds ",
        residual_worker_ < 0
            ? std::string("none")
            : absl::StrCat("worker ", residual_worker_, "'s at step ", residual_step_)));
  }
  // Spent until the unit ends: a unit that fails leaves them half-updated.
  residual_worker_ = -1;
  residual_step_ = -1;
  return absl::OkStatus();
}

}  // namespace worker
}  // namespace psc
