#include "worker/replica_trainer.h"

#include <algorithm>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "common/base/logging.h"
#include "common/base/status_macros.h"
#include "common/collective/gloo_collective.h"
#include "common/collective/store_wait.h"
#include "common/data/prefetcher.h"
#include "common/io/crc32c.h"
#include "common/job/compiled_metrics.h"
#include "common/job/job_data.h"
#include "common/job/job_loss.h"
#include "common/job/job_model.h"
#include "common/job/step_batch.h"
#include "common/optimizer/optimizer.h"
#include "common/tensor/tensor.h"
#include "common/tensor/wire_dtype.h"
#include "worker/divergence.h"
#include "worker/replica_backends.h"

namespace psc {
namespace worker {

absl::StatusOr<std::unique_ptr<ReplicaTrainer>> ReplicaTrainer::Create(
    const proto::JobSpec& job, int worker_index, ps_client::ParameterClient* client,
    const DeviceSetup& devices, base::Clock* clock, const CollectiveSetup* collective) {
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
  // With backup workers a step reads more than the batch (step_batch.h).
  const int64_t read = job::ExamplesReadPerStep(job);
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
  PSC_ASSIGN_OR_RETURN(
      auto replicas, CreateReplicas(devices, t->model_.get(), job.intra_op_threads(), replica_batch,
                                    job::CpuOptionsForJob(job, 0).conv));
  PSC_RETURN_IF_ERROR(replicas->Prepare(read / slots));
  t->replicas_ = std::move(replicas);
  const std::vector<compute::LayerVariables>& layers = t->model_->layer_variables();
  for (int i = static_cast<int>(layers.size()) - 1; i >= 0; --i) {
    for (int v : compute::LayerVariableIndices(layers[i])) t->ready_order_.push_back(v);
  }
  t->trainable_ = t->model_->trainable_variables();
  if (job.strategy() == proto::MULTI_WORKER_MIRRORED) {
    if (collective == nullptr || collective->store == nullptr) {
      return absl::FailedPreconditionError(
          "--strategy=multi_worker_mirrored: this worker has no coordinator to form its "
          "group through (its cluster has ps tasks, or no chief and it is not a collective "
          "cluster)");
    }
    t->collective_setup_ = *collective;
    // A frozen variable's gradient is not reduced (its slot is empty).
    const std::vector<bool> frozen = t->model_->frozen_variables();
    std::vector<int64_t> sizes;
    for (size_t v = 0; v < frozen.size(); ++v) {
      sizes.push_back(frozen[v] ? 0 : tensor::NumElements(t->model_->variables()[v].shape));
    }
    const int64_t bucket = job.collective().bucket_bytes() > 0
                               ? job.collective().bucket_bytes()
                               : collective::BucketedReducer::kDefaultBucketBytes;
    PSC_ASSIGN_OR_RETURN(
        t->reducer_, collective::BucketedReducer::Create(sizes, t->ready_order_, bucket, clock));
    // With one local replica the executor hands each layer's gradients over
    // as the backward pass makes them; with several, they are combined on
    // the host first and reduced after the pass.
    if (job.collective().overlap() && t->replicas_->size() == 1) {
      t->hooked_ = true;
      ReplicaTrainer* self = t.get();
      t->replicas_->primary()->SetGradientReadyHook([self](int layer) -> absl::Status {
        for (int v : compute::LayerVariableIndices(self->model_->layer_variables()[layer])) {
          if (!self->sharded_->frozen(v)) {
            PSC_RETURN_IF_ERROR(
                self->replicas_->primary()->CopyGradient(v, self->reducer_->Slot(v)));
          }
          PSC_RETURN_IF_ERROR(self->SlotFilled(v));
        }
        return absl::OkStatus();
      });
    }
  }
  PSC_ASSIGN_OR_RETURN(auto sharded,
                       ps_client::ShardedParameters::Create(job.placement(), t->model_->variables(),
                                                            t->model_->frozen_variables()));
  t->sharded_ = std::make_unique<ps_client::ShardedParameters>(std::move(sharded));
  if (t->sharded_->num_shards() != client->num_shards()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the job places variables on ", t->sharded_->num_shards(),
                     " shards; the cluster has ", client->num_shards()));
  }
  if (job.policy().topk_ratio() > 0 && !t->collective()) {
    PSC_ASSIGN_OR_RETURN(t->topk_,
                         TopKCompressor::Create(job.policy().topk_ratio(), job.placement(),
                                                t->model_->moving_averages()));
  }
  if (job.push().overlap() && !t->collective()) PSC_RETURN_IF_ERROR(t->SetUpOverlap(clock));
  return t;
}

absl::Status ReplicaTrainer::SetUpOverlap(base::Clock* clock) {
  if (replicas_->size() != 1) {
    // The hook is one executor's; several are combined after the pass.
    base::Logf("worker %d: --overlap needs one local replica; this worker has %d: whole pushes",
               worker_index_, replicas_->size());
    return absl::OkStatus();
  }
  const int64_t bucket = job_.push().bucket_bytes() > 0
                             ? job_.push().bucket_bytes()
                             : collective::BucketedReducer::kDefaultBucketBytes;
  PSC_ASSIGN_OR_RETURN(overlapped_, OverlappedPush::Create(sharded_.get(), ready_order_, bucket,
                                                           client_, kStepTimeout, clock));
  overlapped_->set_compressor(topk_.get());
  grads_.resize(model_->variables().size());
  for (size_t v = 0; v < grads_.size(); ++v) {
    grads_[v].assign(tensor::NumElements(model_->variables()[v].shape), 0.0f);
  }
  // The step's parameters, pulled in parts after the last step's push,
  // are set layer by layer as the forward pass reaches them.
  replicas_->primary()->SetParametersNeededHook([this](int layer) -> absl::Status {
    if (!pull_step_) return absl::OkStatus();
    for (int v : compute::LayerVariableIndices(model_->layer_variables()[layer])) {
      PSC_RETURN_IF_ERROR(overlapped_->TakeVariable(v, &params_));
      PSC_RETURN_IF_ERROR(replicas_->primary()->SetParameter(v, params_[v]));
    }
    return absl::OkStatus();
  });
  replicas_->primary()->SetGradientReadyHook([this](int layer) -> absl::Status {
    if (!overlap_step_) return absl::OkStatus();
    for (int v : compute::LayerVariableIndices(model_->layer_variables()[layer])) {
      PSC_RETURN_IF_ERROR(replicas_->primary()->CopyGradient(v, absl::MakeSpan(grads_[v])));
      PSC_RETURN_IF_ERROR(overlapped_->Ready(v));
    }
    return absl::OkStatus();
  });
  std::string parts;
  for (int s = 0; s < client_->num_shards(); ++s) {
    absl::StrAppend(&parts, s == 0 ? "" : ", ", overlapped_->num_parts(s));
  }
  base::Logf(
      "worker %d: pushes in parts as the backward pass makes them, pulls in parts as the "
      "forward pass needs them (%d buckets of %d bytes; parts per shard: %s)",
      worker_index_, overlapped_->num_buckets(), bucket, parts);
  return absl::OkStatus();
}

absl::Status ReplicaTrainer::Pull(int64_t step) {
  std::vector<proto::PullRequest> requests(client_->num_shards());
  for (auto& r : requests) {
    // A group's replica is checked instead of waited for (RunSteps).
    if (job_.policy().mode() == proto::MODE_SYNC && !collective()) r.set_min_version(step);
    r.set_worker(worker_index_);
    r.set_worker_clock(step);
    r.set_wire_dtype(job_.policy().wire_dtype());
    r.set_skip_frozen(frozen_held_);
  }
  std::vector<proto::PullResponse> responses;
  PSC_RETURN_IF_ERROR(client_->PullAll(requests, &responses, kStepTimeout));
  std::vector<const google::protobuf::RepeatedPtrField<proto::NamedTensor>*> parts;
  versions_.clear();
  for (const auto& r : responses) {
    parts.push_back(&r.variables());
    versions_.push_back(r.version());
  }
  PSC_RETURN_IF_ERROR(sharded_->Assemble(parts, &params_, frozen_held_));
  have_params_ = true;
  frozen_held_ = true;
  return absl::OkStatus();
}

absl::Status ReplicaTrainer::CheckPeersRunThisJob(const proto::RunUnitRequest& unit,
                                                  absl::Duration timeout,
                                                  const std::function<bool()>& cancelled) {
  // What every member must agree on: the job (model, data, optimizer,
  // strategy: its serialized spec), the group's size and the unit.
  const std::string spec = job_.SerializeAsString();
  const std::string mine = absl::StrCat("job ", absl::Hex(io::Crc32c(spec.data(), spec.size())),
                                        ", group of ", unit.num_slots(), ", unit ", unit.unit(),
                                        " steps ", unit.first_step(), "+", unit.num_steps());
  const std::string& prefix = unit.group().prefix();
  PSC_RETURN_IF_ERROR(
      collective_setup_.store->Set(absl::StrCat(prefix, "member/", unit.replica_slot()), mine));
  // One deadline for every peer, not one each.
  const absl::Time deadline = clock_->Now() + timeout;
  for (int rank = 0; rank < unit.num_slots(); ++rank) {
    if (rank == unit.replica_slot()) continue;
    timeout = std::max(deadline - clock_->Now(), absl::ZeroDuration());
    PSC_ASSIGN_OR_RETURN(
        const std::string theirs,
        collective::WaitForKey(collective_setup_.store, absl::StrCat(prefix, "member/", rank),
                               collective::AbortKey(prefix), timeout, cancelled));
    if (theirs != mine) {
      return absl::FailedPreconditionError(
          absl::StrCat("collective group ", prefix, ": rank ", rank, " runs ", theirs,
                       "; this worker (rank ", unit.replica_slot(), ") runs ", mine));
    }
  }
  return absl::OkStatus();
}

absl::Duration ReplicaTrainer::collective_timeout() const {
  if (!collective()) return absl::ZeroDuration();
  const double seconds = job_.collective().timeout_seconds();
  return seconds > 0 ? absl::Seconds(seconds) : absl::Seconds(60);
}

absl::Status ReplicaTrainer::JoinGroup(const proto::RunUnitRequest& unit,
                                       const std::function<bool()>& cancelled) {
  if (unit.group().prefix().empty()) {
    return absl::InvalidArgumentError("a multi_worker_mirrored unit without its group");
  }
  if (group_ != nullptr && group_prefix_ == unit.group().prefix() &&
      group_->rank() == unit.replica_slot() && group_->size() == unit.num_slots()) {
    return absl::OkStatus();
  }
  group_.reset();
  group_prefix_.clear();
  const absl::Duration timeout = collective_timeout();
  PSC_RETURN_IF_ERROR(CheckPeersRunThisJob(unit, timeout, cancelled));
  absl::StatusOr<std::unique_ptr<collective::Collective>> group;
  if (replicas_->device(0).kind == LogicalDevice::kGpu && replicas_->gpu() != nullptr) {
    group = replicas_->gpu()->CreateNcclCollective(collective_setup_.store, unit.group().prefix(),
                                                   unit.replica_slot(), unit.num_slots(),
                                                   replicas_->device(0).gpu, timeout);
  } else {
    collective::GlooOptions options;
    options.hostname = collective_setup_.hostname;
    options.timeout = timeout;
    options.abort_key = collective::AbortKey(unit.group().prefix());
    options.cancelled = cancelled;
    group = collective::CreateGlooCollective(collective_setup_.store, unit.group().prefix(),
                                             unit.replica_slot(), unit.num_slots(), options);
  }
  if (!group.ok()) return group.status();
  group_ = *std::move(group);
  group_prefix_ = unit.group().prefix();
  base::Logf("worker %d: in collective group %s (%s)", worker_index_, group_prefix_,
             group_->Describe());
  return absl::OkStatus();
}

absl::Status ReplicaTrainer::SlotFilled(int v) {
  const std::optional<float>& average = model_->moving_averages()[v];
  if (average.has_value() && group_->size() > 1) {
    // The group's mean statistic is the sum of each member's 1/size share.
    const float share = 1.0f / static_cast<float>(group_->size());
    for (float& x : reducer_->Slot(v)) x *= share;
  }
  return reducer_->MarkReady(v);
}

absl::Status ReplicaTrainer::ReduceStep(collective::ReduceTiming* timing) {
  absl::Status filled;
  if (!hooked_) {
    filled = [&]() -> absl::Status {
      PSC_RETURN_IF_ERROR(replicas_->CopyGradients(&grads_));
      for (int v : ready_order_) {
        absl::Span<float> slot = reducer_->Slot(v);
        if (sharded_->frozen(v)) {  // not reduced
          PSC_RETURN_IF_ERROR(SlotFilled(v));
          continue;
        }
        if (grads_[v].size() != slot.size()) {
          return absl::InternalError(absl::StrCat("gradient ", v, " has ", grads_[v].size(),
                                                  " elements; its variable ", slot.size()));
        }
        std::copy(grads_[v].begin(), grads_[v].end(), slot.begin());
        PSC_RETURN_IF_ERROR(SlotFilled(v));
      }
      return absl::OkStatus();
    }();
  }
  // Always closes the step: the buckets already handed over are waited for
  // before the group may be left.
  absl::Status finished = reducer_->Finish(&grads_, timing);
  return filled.ok() ? finished : filled;
}

absl::StatusOr<proto::UnitMetrics> ReplicaTrainer::RunUnit(const proto::RunUnitRequest& unit,
                                                           const std::function<bool()>& cancelled,
                                                           const StepDone& step_done) {
  absl::StatusOr<proto::UnitMetrics> metrics = RunSteps(unit, cancelled, step_done);
  if (!metrics.ok()) frozen_held_ = false;  // the next pull brings them again
  if (!metrics.ok() && group_ != nullptr) {
    // Leave the group: the peers' all-reduces with this worker fail now,
    // not at their timeout, and the chief forms the next one.
    group_.reset();
    group_prefix_.clear();
  }
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
  // The examples a step reads, and this slot's share of them.
  const int64_t read = job::ExamplesReadPerStep(job_);
  const int64_t share = read / unit.num_slots();
  // A backup worker late for a step goes on at the servers' step.
  const bool backups = job::HasBackupWorkers(job_);
  const proto::TrainingMode mode = job_.policy().mode();
  // How gradients and variables travel (--wire_dtype; float32 unless set).
  const proto::DataType wire = tensor::WireDtypeOrFloat32(job_.policy().wire_dtype());
  // A lost worker's unit handed over: push under its identity (exactly once).
  const int identity = unit.has_push_as_worker() ? unit.push_as_worker() : worker_index_;
  // Per replica slot its share's mean (the servers average the slots); in
  // a group, each member's part of the global batch's mean (the all-reduce
  // sums them).
  const float mean_scale = collective()
                               ? 1.0f / static_cast<float>(job_.batch_size())
                               : static_cast<float>(unit.num_slots()) / static_cast<float>(read);
  // Under reduction="sum" the step applies the sum over its examples: an
  // all-reduce sums, a sync step's servers average the gradients they
  // aggregate (so each is scaled by their number), an async push is applied
  // alone.
  const float sum_scale =
      collective() || mode != proto::MODE_SYNC
          ? 1.0f
          : static_cast<float>(backups ? job::ReplicasToAggregate(job_) : unit.num_slots());
  const job::JobLoss loss_kind(job_);
  // The compiled metrics of the unit's training batches (Keras's running
  // training metrics), from the model's outputs of each step.
  job::MetricSums metric_sums({job_.metrics().begin(), job_.metrics().end()});
  std::vector<float> outputs;
  proto::UnitMetrics metrics;
  metrics.set_straggler_factor(straggler_factor_);
  absl::Duration compute_time, comm_time, exposed_time, idle_time;
  // The times already reported to step_done: each sample carries what
  // accrued since the last one (the unit's first pull goes with step 1),
  // so the samples add up to the unit's metrics.
  absl::Duration compute_told, comm_told, exposed_told, idle_told;
  if (collective()) PSC_RETURN_IF_ERROR(JoinGroup(unit, cancelled));
  if (topk_ != nullptr) {
    PSC_RETURN_IF_ERROR(TakeErrorFeedback(unit, identity));
  } else if (unit.has_error_feedback()) {
    return absl::InvalidArgumentError(
        "the unit brings error-feedback residuals; this job has no --topk_ratio (a unit of "
        "another job's settings)");
  }
  const int64_t end = unit.first_step() + unit.num_steps();
  // The parameters of the unit's first step: in sync exactly that version.
  // A unit that failed midway leaves params_ of an unknown version: only a
  // unit that ended cleanly at this step lets the next one skip the pull.
  // In a group the replica is local (a pull costs a copy) and may have been
  // replaced by a peer's state since: always pull.
  const bool reuse =
      have_params_ && mode == proto::MODE_SYNC && next_step_ == unit.first_step() && !collective();
  have_params_ = false;
  next_step_ = -1;
  if (!reuse) {
    const absl::Time t0 = clock_->Now();
    PSC_RETURN_IF_ERROR(Pull(unit.first_step()));
    if (collective() && versions_[0] != unit.first_step()) {
      return absl::FailedPreconditionError(absl::StrCat("this worker's replica holds step ",
                                                        versions_[0], "; the unit starts at ",
                                                        unit.first_step()));
    }
    if (!collective()) comm_time += clock_->Now() - t0;
  }
  data::Prefetcher prefetcher(&data_.train, plan_.get(), unit.first_step(), unit.num_steps(),
                              unit.replica_slot(), unit.num_slots(), 2);
  std::vector<std::vector<proto::NamedTensor>> split;
  std::vector<proto::PushRequest> pushes(client_->num_shards());
  std::vector<proto::PushResponse> replies;
  int64_t fetched = unit.first_step();  // the step prefetcher.Next() returns
  // A unit that ends early (an error, cancelled) ends the pulls of its next
  // step's parameters still in flight: a sync pull would wait for a step
  // that may never complete.
  absl::Cleanup abandon_pulls = [this] {
    if (overlapped_ != nullptr && overlapped_->pulls_pending()) overlapped_->Abandon();
  };
  for (int64_t step = unit.first_step(); step < end;) {
    if (cancelled && cancelled()) return absl::CancelledError("unit cancelled");
    // A backup that missed steps skips their batches (their slices of this
    // slot are dropped, as its late gradients were).
    for (; fetched < step; ++fetched) PSC_RETURN_IF_ERROR(prefetcher.Next().status());
    PSC_ASSIGN_OR_RETURN(auto batch, prefetcher.Next());
    ++fetched;
    const absl::Time t0 = clock_->Now();
    // With pulls in parts the forward pass sets the parameters as they come.
    const bool pulling = overlapped_ != nullptr && overlapped_->pulls_pending();
    if (!pulling) PSC_RETURN_IF_ERROR(replicas_->SetParameters(params_));
    compute::StepResult r;
    const compute::LossOptions step_loss =
        loss_kind.Step(mean_scale, sum_scale, batch.weights, batch.targets);
    // The slot's share of the step's batch starts at slot * (batch / slots).
    replicas_->SetDropoutKey(job_.seed(), step, unit.replica_slot() * share);
    if (collective()) {
      PSC_RETURN_IF_ERROR(reducer_->Begin(group_.get()));
      absl::Status computed =
          replicas_->ComputeGradients(batch.images, batch.labels, step_loss, &r);
      collective::ReduceTiming timing;
      // A failed pass still waits for the buckets it started (Finish).
      absl::Status reduced =
          computed.ok() ? ReduceStep(&timing) : reducer_->Finish(&grads_, &timing);
      PSC_RETURN_IF_ERROR(computed);
      PSC_RETURN_IF_ERROR(reduced);
      // Every member holds the same sum: each stops with the same report.
      PSC_RETURN_IF_ERROR(CheckFinite(r.loss_sum, identity, step, absl::OkStatus()));
      comm_time += timing.comm;
      exposed_time += timing.exposed;
    } else if (overlapped_ != nullptr) {
      // Parts go out from the backward pass's hook; a straggler's idle
      // comes before any (its gradients must not arrive early).
      for (int shard = 0; shard < client_->num_shards(); ++shard) {
        PushHeader(unit, step, identity, wire, shard, &pushes[shard]);
      }
      overlapped_->Begin(pushes, wire, &grads_);
      overlap_step_ = straggler_factor_ <= 1.0;
      pull_step_ = pulling;
      absl::Status computed =
          replicas_->ComputeGradients(batch.images, batch.labels, step_loss, &r);
      overlap_step_ = false;
      pull_step_ = false;
      if (computed.ok() && straggler_factor_ > 1.0) {
        const absl::Time idle_start = clock_->Now();
        computed = replicas_->CopyGradients(&grads_);
        if (computed.ok())
          computed = Idle((idle_start - t0) * (straggler_factor_ - 1.0), cancelled);
        idle_time += clock_->Now() - idle_start;
        for (int v : ready_order_) {
          if (computed.ok()) computed = overlapped_->Ready(v);
        }
      }
      // Waits for the parts sent even when the pass failed.
      absl::Status pushed = overlapped_->Finish(&replies);
      PSC_RETURN_IF_ERROR(computed);
      // The parts went out as the pass made them: the servers refused a
      // non-finite one (and fail the sync step's waiting pulls).
      PSC_RETURN_IF_ERROR(CheckFinite(r.loss_sum, identity, step, pushed));
      PSC_RETURN_IF_ERROR(pushed);
      for (int shard = 0; shard < client_->num_shards(); ++shard) {
        versions_[shard] = overlapped_->pulled_version(shard);
      }
      // The unit's last step takes the whole next version now (the next
      // unit may start from it); other steps' forward passes take it.
      const int64_t next = backups ? std::max(step + 1, std::min(versions_[0], end)) : step + 1;
      if (next >= end) PSC_RETURN_IF_ERROR(overlapped_->TakeAll(&params_));
      absl::Duration comm, exposed;
      overlapped_->TakeTimes(&comm, &exposed);
      comm_time += comm;
      exposed_time += exposed;
    } else {
      PSC_RETURN_IF_ERROR(replicas_->ComputeGradients(batch.images, batch.labels, step_loss, &r));
      PSC_RETURN_IF_ERROR(replicas_->CopyGradients(&grads_));
    }
    if (overlapped_ == nullptr) {
      // Keras's global_clipnorm over the whole gradient this worker sends
      // (in a group: the all-reduced one, every member alike).
      if (job_.optimizer().global_clipnorm() > 0) {
        optimizer::ClipByGlobalNorm(job_.optimizer().global_clipnorm(), trainable_, &grads_);
      }
      PSC_RETURN_IF_ERROR(EncodeGradients(wire, &split));
      if (straggler_factor_ > 1.0) {
        // An experiment's slow worker: as if its compute took factor times as long.
        const absl::Time idle_start = clock_->Now();
        PSC_RETURN_IF_ERROR(Idle((idle_start - t0) * (straggler_factor_ - 1.0), cancelled));
        idle_time += clock_->Now() - idle_start;
      }
    }
    const absl::Time t1 = clock_->Now();
    if (overlapped_ == nullptr) {
      for (int shard = 0; shard < client_->num_shards(); ++shard) {
        proto::PushRequest& p = pushes[shard];
        PushHeader(unit, step, identity, wire, shard, &p);
        for (auto& t : split[shard]) *p.add_gradients() = std::move(t);
      }
      // A non-finite gradient is pushed all the same: the servers refuse it
      // and, in sync, fail the pulls waiting for this step at once, so that
      // no other worker waits for a step that cannot complete. A non-finite
      // loss with finite gradients is refused by the worker itself, in the
      // push, to the same effect.
      if (!job_.policy().skip_nonfinite()) {
        const std::string report = NonFiniteReport(r.loss_sum, grads_, model_->variables());
        if (!report.empty()) {
          for (proto::PushRequest& p : pushes) p.set_step_refused(report);
        }
      }
      const absl::Status pushed = client_->PushAll(pushes, &replies, kStepTimeout);
      PSC_RETURN_IF_ERROR(CheckFinite(r.loss_sum, identity, step, pushed));
      PSC_RETURN_IF_ERROR(pushed);
    }
    if (overlapped_ == nullptr) {
      std::vector<const google::protobuf::RepeatedPtrField<proto::NamedTensor>*> parts;
      for (int shard = 0; shard < client_->num_shards(); ++shard) {
        parts.push_back(&replies[shard].variables());
        versions_[shard] = replies[shard].version();
      }
      PSC_RETURN_IF_ERROR(sharded_->Assemble(parts, &params_, frozen_held_));
    }
    if (collective() || overlapped_ != nullptr) {
      // Applying the sum to the local replica is the worker's own work;
      // with parts, the wait for the last answers is the exposed comm.
      compute_time += clock_->Now() - t0;
    } else {
      comm_time += clock_->Now() - t1;
      compute_time += t1 - t0;
    }
    metrics.set_loss_sum(metrics.loss_sum() + r.loss_sum);
    metrics.set_correct(metrics.correct() + r.correct);
    if (!metric_sums.empty()) {
      PSC_RETURN_IF_ERROR(replicas_->CopyOutputs(&outputs));
      metric_sums.Add(outputs, batch.labels, model_->classes(), batch.targets);
    }
    metrics.set_examples(metrics.examples() + r.examples);
    metrics.set_steps(metrics.steps() + 1);
    if (replies[0].outcome() == proto::PushResponse::DROPPED_STALE) {
      metrics.set_examples_dropped(metrics.examples_dropped() + r.examples);
    }
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
          absl::ToDoubleSeconds((compute_time - compute_told) - (exposed_time - exposed_told));
      sample.comm_seconds = absl::ToDoubleSeconds(comm_time - comm_told);
      sample.idle_seconds = absl::ToDoubleSeconds(idle_time - idle_told);
      compute_told = compute_time;
      comm_told = comm_time;
      exposed_told = exposed_time;
      idle_told = idle_time;
      step_done(sample);
    }
    // Sync: the servers are at step + 1, or further when this worker was
    // late and the step completed without it (a backup): it goes on there,
    // and a unit the others finished is over for it too.
    step = backups ? std::max(step + 1, std::min(versions_[0], end)) : step + 1;
  }
  have_params_ = true;
  next_step_ = end;
  if (topk_ != nullptr) {
    residual_worker_ = identity;
    residual_step_ = end;
    *metrics.mutable_error_feedback() = topk_->Save(identity, end);
  }
  metrics.set_compute_seconds(absl::ToDoubleSeconds(compute_time));
  metrics.set_comm_seconds(absl::ToDoubleSeconds(comm_time));
  metrics.set_idle_seconds(absl::ToDoubleSeconds(idle_time));
  metrics.set_examples_skipped((unit.num_steps() - metrics.steps()) * share);
  if (collective() || overlapped_ != nullptr) {
    // Step time = compute (the pass and the apply, less the wait) + the wait.
    metrics.set_compute_seconds(absl::ToDoubleSeconds(compute_time - exposed_time));
    metrics.set_comm_exposed_seconds(absl::ToDoubleSeconds(exposed_time));
  }
  if (!metric_sums.empty()) *metrics.mutable_metric_sums() = metric_sums.sums();
  return metrics;
}

absl::Status ReplicaTrainer::CheckFinite(double loss_sum, int identity, int64_t step,
                                         const absl::Status& pushed) const {
  if (job_.policy().skip_nonfinite()) return absl::OkStatus();  // the servers skip them
  const std::string report = NonFiniteReport(loss_sum, grads_, model_->variables());
  if (report.empty()) return absl::OkStatus();
  return DivergedError(identity, step, report, job_.optimizer().learning_rate(), pushed);
}

absl::Status ReplicaTrainer::TakeErrorFeedback(const proto::RunUnitRequest& unit, int identity) {
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

absl::Status ReplicaTrainer::EncodeGradients(proto::DataType wire,
                                             std::vector<std::vector<proto::NamedTensor>>* split) {
  if (topk_ == nullptr) return sharded_->Split(grads_, wire, split);
  PSC_RETURN_IF_ERROR(sharded_->Split(grads_, proto::DT_FLOAT32, split));
  for (std::vector<proto::NamedTensor>& shard : *split) {
    PSC_RETURN_IF_ERROR(topk_->Encode(wire, &shard));
  }
  return absl::OkStatus();
}

void ReplicaTrainer::PushHeader(const proto::RunUnitRequest& unit, int64_t step, int identity,
                                proto::DataType wire, int shard, proto::PushRequest* p) const {
  p->Clear();
  // In a group the push is the step's one gradient of the embedded
  // replica: always worker 0, slot 0 of 1.
  p->mutable_id()->set_worker(collective() ? 0 : identity);
  p->mutable_id()->set_unit(unit.unit());
  p->mutable_id()->set_step(step);
  p->mutable_id()->set_replica_slot(collective() ? 0 : unit.replica_slot());
  p->set_computed_on_version(versions_[shard]);
  p->set_worker_clock(step + 1);
  p->set_pull_after(true);
  p->set_pull_wire_dtype(wire);
  p->set_pull_skip_frozen(frozen_held_);
  if (job_.policy().mode() == proto::MODE_SYNC) p->set_pull_min_version(step + 1);
}

absl::Status ReplicaTrainer::Idle(absl::Duration idle, const std::function<bool()>& cancelled) {
  const absl::Time until = clock_->Now() + idle;
  // In slices, so that a cancelled unit ends within one.
  for (absl::Time now = clock_->Now(); now < until; now = clock_->Now()) {
    if (cancelled && cancelled()) return absl::CancelledError("unit cancelled");
    clock_->SleepFor(std::min(until - now, absl::Milliseconds(50)));
  }
  return absl::OkStatus();
}

}  // namespace worker
}  // namespace psc
