#include "chief/job_runner.h"

#include <algorithm>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "chief/error_feedback_book.h"
#include "chief/evaluation_parameters.h"
#include "chief/job_report.h"
#include "chief/membership.h"
#include "chief/recovery.h"
#include "chief/server_weights.h"
#include "chief/shard_control.h"
#include "chief/unit_dispatcher.h"
#include "chief/unit_failure.h"
#include "chief/work_queue.h"
#include "common/base/logging.h"
#include "common/base/status_macros.h"
#include "common/collective/store_wait.h"
#include "common/compute/cpu_backend.h"
#include "common/compute/model.h"
#include "common/data/batch_plan.h"
#include "common/data/dataset.h"
#include "common/job/epoch_callbacks.h"
#include "common/job/evaluation.h"
#include "common/job/job_data.h"
#include "common/job/job_flags.h"
#include "common/job/job_loss.h"
#include "common/job/job_model.h"
#include "common/job/record_stream.h"
#include "common/job/step_batch.h"
#include "common/optimizer/optimizer.h"
#include "common/placement/placement.h"
#include "common/ps_client/sharded_parameters.h"
#include "common/summary/event_file.h"
#include "common/tensor/wire_dtype.h"

namespace psc {
namespace chief {
namespace {

constexpr absl::Duration kPullTimeout = absl::Minutes(2);
// Examples per evaluation batch (job::EvaluateSplit's).
constexpr int64_t kEvalBatch = 250;

class Runner {
 public:
  Runner(const JobRunnerOptions& options, ps_client::ParameterClient* servers,
         WorkerClient* workers)
      : o_(options),
        job_(options.job),
        servers_(servers),
        workers_(workers),
        clock_(options.clock != nullptr ? options.clock : &real_clock_) {}

  ~Runner() {
    // The replicas' client outlives this job: it must not ask its membership.
    if (group_ != nullptr) group_->SetLive(nullptr);
  }

  absl::StatusOr<job::JobResult> Run();

 private:
  // The model, its placement, the data, the evaluation backend, and the
  // parts of the job.
  absl::Status Setup();
  // The end of the unit that starts at `step`: at most unit_steps steps,
  // never past an epoch end, a checkpoint step or the end of the job.
  int64_t UnitEnd(int64_t step) const;
  // Runs the unit [step, end) and what a failure in it calls for. True when
  // it is done; false when the servers were restored, to *step.
  absl::StatusOr<bool> RunUnit(int64_t* step, int64_t end);
  // async and ssp: the work queue (work_queue.h) instead of units in lock
  // step. Whether the job runs it.
  bool queued() const { return !collective() && job_.policy().mode() != proto::MODE_SYNC; }
  // The end of the stretch that starts at `step`: the next epoch end,
  // checkpoint step, validation point or the end of the job, where every
  // worker is idle.
  int64_t StretchEnd(int64_t step) const;
  // Runs the pieces of [step, end) from the queue, as RunUnit runs a unit.
  absl::StatusOr<bool> RunStretch(int64_t* step, int64_t end);
  // Configures every shard and restores the latest checkpoint, or creates
  // the variables (and checkpoints them at step 0); again from the start
  // when a server restarts meanwhile (at most 10 times). The step to go on
  // from.
  absl::StatusOr<int64_t> StartServers();
  // Checkpoints and evaluates where `step` calls for it.
  absl::Status AfterUnit(int64_t step);
  absl::StatusOr<job::SplitMetrics> Evaluate(const data::Split& split);
  // The last checkpoint, the test evaluation and the result.
  absl::StatusOr<job::JobResult> Finish();
  // After `failure` of what the chief asks the servers between units
  // (checkpoints, evaluation pulls, closing the last step): when a server
  // restarted empty or does not answer, restores them as after a failed
  // unit and returns the step to go on from; otherwise `failure` is the
  // job's own and is returned.
  absl::StatusOr<int64_t> RecoverBetweenUnits(const absl::Status& failure);
  // What a checkpoint records of the workers: their error feedback
  // (--topk_ratio), or nothing.
  proto::ErrorFeedbackState WorkerState() const {
    return book_ != nullptr ? book_->State() : proto::ErrorFeedbackState();
  }
  // `failure` of the unit at `step` as the job's error: it cannot be redone,
  // and the last checkpoint is named.
  absl::Status JobError(const absl::Status& failure, int64_t step) const;
  // The job's state for the chief's metrics (o_.gauges), at `step`.
  void PublishGauges(int64_t step);

  // multi_worker_mirrored.
  bool collective() const { return job_.strategy() == proto::MULTI_WORKER_MIRRORED; }
  // Names the unit's group: a new one whenever its members change or the
  // last one failed.
  void NameGroup(Unit* unit);
  // After `failure` of a unit whose workers answer: brings every live
  // replica to the furthest one's step and returns it.
  absl::StatusOr<int64_t> Regroup(const absl::Status& failure);
  // Copies worker src's replica (at `step`) over worker dst's.
  absl::Status CopyReplica(int src, int dst, int64_t step);
  // The one way a lost worker takes part again, in every mode and
  // strategy: at most every join_poll, a lost worker that `may_admit`
  // allows and that answers gets the job (multi_worker_mirrored: and a
  // peer's replica) and is live from then on (Membership::Rejoin). In sync
  // and multi_worker_mirrored, only while one more worker still splits the
  // batch evenly. Returns the workers admitted.
  std::vector<int> AdmitReturningWorkers(const std::function<bool(int)>& may_admit);
  // Worker `w` asked to leave: takes it out of the job (Membership::Retire)
  // and answers it, or answers why it cannot leave now (the last worker;
  // sync where the others would not split the batch evenly). True when it
  // is out.
  // Serialized (feeders call it concurrently): two leaves never both see
  // the other's worker as the one that stays.
  bool Leave(int w) ABSL_LOCKS_EXCLUDED(leave_mu_);
  absl::Mutex leave_mu_;
  // Leave for every live worker that asked to (at a unit or stretch start,
  // every worker idle).
  void RetireLeavers();
  // The workers that take part from the start; the batch contract's R.
  int initial_ = 0;
  // async and ssp on streamed files: the slot each worker trained last, so
  // that it follows on in the next stretch (WorkQueue's kept slots).
  std::map<int, int> kept_slots_;

  ReplicaGroupClient* group_ = nullptr;
  std::string run_nonce_;
  int64_t generation_ = 0;
  std::vector<int> group_members_;
  int64_t regroups_ = 0;
  int regroups_in_a_row_ = 0;
  std::vector<absl::Time> next_join_check_;  // per worker, while it is lost
  std::vector<int> join_misses_;             // per worker: probes unanswered in a row

  const JobRunnerOptions& o_;
  proto::JobSpec job_;
  ps_client::ParameterClient* const servers_;
  WorkerClient* const workers_;
  base::RealClock real_clock_;
  base::Clock* const clock_;

  std::unique_ptr<compute::Model> model_;
  std::unique_ptr<ps_client::ShardedParameters> sharded_;
  std::unique_ptr<compute::ComputeBackend> backend_;
  std::unique_ptr<EvaluationParameters> eval_;
  data::FashionMnist data_;
  job::DataRecord data_record_;
  int64_t steps_per_epoch_ = 0;
  int64_t total_steps_ = 0;
  int64_t checkpoints_written_ = 0;
  int64_t last_checkpoint_step_ = -1;  // -1: none
  absl::Time start_;                   // when RunJob began

  std::unique_ptr<summary::EventWriter> train_events_, validation_events_, test_events_;
  std::unique_ptr<ShardControl> shards_;
  std::unique_ptr<Membership> membership_;
  std::unique_ptr<UnitDispatcher> dispatcher_;
  std::unique_ptr<Recovery> recovery_;
  std::unique_ptr<JobReport> report_;
  std::unique_ptr<ErrorFeedbackBook> book_;  // --topk_ratio

  // Keras's EarlyStopping and ModelCheckpoint(save_best_only) (job flags).
  absl::Status OnEpochEnd(int64_t step);
  std::unique_ptr<job::EpochCallbacks> callbacks_;
  std::vector<std::vector<float>> best_params_;  // restore_best_weights
  job::StopRecord stop_;
  double learning_rate_ = 0;  // what the servers apply now
};

absl::Status Runner::Setup() {
  PSC_ASSIGN_OR_RETURN(compute::Model model, job::ModelForJob(job_));
  model_ = std::make_unique<compute::Model>(std::move(model));
  PSC_ASSIGN_OR_RETURN(*job_.mutable_placement(),
                       placement::PlaceVariables(model_->variables(), {servers_->num_shards()}));
  // How each variable's gradient travels (a group's all-reduce sums dense;
  // tables travel by rows in whole pushes to ps tasks).
  PSC_RETURN_IF_ERROR(job::CheckRowTableOptions(job_, *model_));
  PSC_RETURN_IF_ERROR(placement::DeclareGradients(
      collective() ? 0 : job_.policy().topk_ratio(), model_->moving_averages(),
      job_.mutable_placement(),
      job::TablesTravelByRows(job_, *model_) ? model_->table_variables() : std::vector<bool>()));
  {
    // A mixed model under a 16-bit wire: what its layers use in float32
    // is pulled in float32 (a float32 model's wire is the user's choice).
    const std::vector<compute::DType> dtypes = model_->ComputeDtypes();
    const bool mixed = std::any_of(dtypes.begin(), dtypes.end(), compute::IsLowPrecision);
    if (mixed && tensor::WireDtypeOrFloat32(job_.policy().wire_dtype()) != proto::DT_FLOAT32) {
      const std::vector<bool> f32 = model_->float32_variables();
      PSC_RETURN_IF_ERROR(placement::DeclareFloat32Pulls(f32, job_.mutable_placement()));
      const int64_t n = std::count(f32.begin(), f32.end(), true);
      if (n > 0) {
        base::Logf("%lld of %zu variables pulled in float32 (their layers use them in float32)",
                   static_cast<long long>(n), f32.size());
      }
    }
  }
  PSC_RETURN_IF_ERROR(optimizer::CheckClipnormPlacement(job_.optimizer(), job_.placement()));
  PSC_ASSIGN_OR_RETURN(ps_client::ShardedParameters sharded,
                       ps_client::ShardedParameters::Create(job_.placement(), model_->variables()));
  sharded_ = std::make_unique<ps_client::ShardedParameters>(std::move(sharded));
  initial_ = o_.initial_workers > 0 ? std::min(o_.initial_workers, workers_->num_workers())
                                    : workers_->num_workers();
  job_.set_num_replicas(initial_);
  if (collective()) {
    if (o_.replica_group == nullptr || o_.replica_group != servers_) {
      return absl::InvalidArgumentError(
          "a multi_worker_mirrored job runs on the workers' replicas (replica_group)");
    }
    group_ = o_.replica_group;
    run_nonce_ = absl::StrCat(absl::Hex(absl::ToUnixNanos(clock_->Now())));
  }
  if (job_.job_id().empty()) {
    job_.set_job_id(
        absl::StrCat(job_.model(), "-", job::ModeName(job_.policy().mode()), "-seed", job_.seed()));
  }
  PSC_ASSIGN_OR_RETURN(job::JobData data, job::LoadJobData(job_, *model_));
  data_ = std::move(data.splits);
  data_record_ = data.record;
  if (job::StreamsRecords(job_)) {  // the workers' shard plans: these counts
    job_.mutable_record_data()->clear_train_records();
    for (int64_t n : data.train_records) job_.mutable_record_data()->add_train_records(n);
  }
  data::BatchPlanOptions plan_options;
  plan_options.num_examples = data_.train.count;
  PSC_RETURN_IF_ERROR(job::ValidateStepBatch(job_, initial_));
  plan_options.batch_size = job::ExamplesReadPerStep(job_);
  plan_options.steps_per_epoch = job_.steps_per_epoch();
  PSC_ASSIGN_OR_RETURN(const data::BatchPlan plan, data::BatchPlan::Create(plan_options));
  // The chief evaluates; it never reads a training image. Keep only the count.
  data_.train.DropExamples();
  steps_per_epoch_ = plan.steps_per_epoch();
  total_steps_ = steps_per_epoch_ * job_.epochs();
  PSC_ASSIGN_OR_RETURN(backend_,
                       compute::CreateCpuBackend(job::CpuOptionsForJob(job_, o_.eval_threads)));
  PSC_ASSIGN_OR_RETURN(eval_, EvaluationParameters::Create(&job_, model_.get(), backend_.get(),
                                                           servers_, sharded_.get(), kEvalBatch));

  shards_ = std::make_unique<ShardControl>(&job_, workers_->num_workers(), servers_, sharded_.get(),
                                           model_.get(), initial_);
  MembershipOptions membership;
  membership.mode = job_.policy().mode();
  membership.num_workers = workers_->num_workers();
  membership.initial_workers = initial_;
  membership.replicas_to_aggregate = job_.policy().replicas_to_aggregate();
  membership.heartbeat_timeout = o_.heartbeat_timeout;
  membership_ = std::make_unique<Membership>(membership, servers_, workers_, o_.registry, clock_);
  dispatcher_ =
      std::make_unique<UnitDispatcher>(workers_, membership_.get(), o_.heartbeat_poll, clock_);
  if (group_ != nullptr) {
    group_->SetLive([membership = membership_.get()] { return membership->live(); });
    if (o_.group_store != nullptr) {
      dispatcher_->set_on_lost([store = o_.group_store](const Unit& unit, int worker) {
        if (unit.requests.empty()) return;
        const std::string& prefix = unit.requests[0].group().prefix();
        // A second loss of the same group finds the key set: nothing to do.
        (void)store->Set(collective::AbortKey(prefix), absl::StrCat("worker:", worker, " is lost"));
      });
    }
  }
  callbacks_ = std::make_unique<job::EpochCallbacks>(job_.callbacks(), job::MetricsOf(job_),
                                                     !job::IsRegressionLoss(job_.loss()));
  RecoveryOptions recovery;
  recovery.mode = job_.policy().mode();
  recovery.checkpoint_dir = o_.checkpoint_dir;
  recovery.server_recovery_timeout = o_.server_recovery_timeout;
  recovery_ = std::make_unique<Recovery>(recovery, servers_, shards_.get(), dispatcher_.get(),
                                         membership_.get(), clock_);
  if (job_.policy().topk_ratio() > 0) {
    book_ = std::make_unique<ErrorFeedbackBook>();
    book_->set_any_step(queued());
    dispatcher_->set_error_feedback(book_.get());
    recovery_->set_error_feedback(book_.get());
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> Runner::StartServers() {
  constexpr int kAttempts = 10;
  for (int attempt = 1;; ++attempt) {
    absl::StatusOr<int64_t> step = [&]() -> absl::StatusOr<int64_t> {
      PSC_RETURN_IF_ERROR(shards_->ConfigureAll());
      PSC_ASSIGN_OR_RETURN(const int64_t from, shards_->InitializeOrRestore(o_.checkpoint_dir));
      if (book_ != nullptr) {
        PSC_RETURN_IF_ERROR(book_->Reset(from, shards_->restored_worker_state()));
      }
      if (from == 0 && !o_.checkpoint_dir.empty()) {
        // The initial variables, so that a server lost before the first
        // periodic checkpoint can be recovered too.
        PSC_RETURN_IF_ERROR(shards_->Checkpoint(o_.checkpoint_dir, 0, WorkerState()));
        ++checkpoints_written_;
        last_checkpoint_step_ = 0;
      } else if (from > 0) {
        last_checkpoint_step_ = from;
      }
      return from;
    }();
    if (step.ok() || attempt == kAttempts) return step;
    // A server that restarted meanwhile holds no configuration: start the
    // servers again. Anything else is the job's own failure.
    bool restarted = false;
    for (int shard = 0; shard < servers_->num_shards() && !restarted; ++shard) {
      absl::StatusOr<proto::ShardStats> stats = servers_->GetStats(shard);
      restarted = !stats.ok() || stats->mode() == proto::MODE_UNSPECIFIED;
    }
    if (!restarted) return step;
    base::Logf(
        "chief: a parameter server restarted while the job started (%s); starting the "
        "servers again",
        std::string(step.status().message()));
  }
}

absl::Status Runner::JobError(const absl::Status& failure, int64_t step) const {
  std::string where = "No checkpoint was written (--checkpoint_dir keeps them).";
  if (last_checkpoint_step_ >= 0) {
    where = absl::StrCat("The last checkpoint is step ", last_checkpoint_step_, " in ",
                         o_.checkpoint_dir, ".");
  }
  return absl::Status(failure.code(),
                      absl::StrCat("the unit at step ", step, " failed and cannot be redone: ",
                                   failure.message(), ". ", where));
}

int64_t Runner::UnitEnd(int64_t step) const {
  const int64_t epoch_end = (step / steps_per_epoch_ + 1) * steps_per_epoch_;
  int64_t end = std::min({epoch_end, step + std::max<int64_t>(1, o_.unit_steps), total_steps_});
  if (o_.checkpoint_every_steps > 0) {
    end = std::min(end, (step / o_.checkpoint_every_steps + 1) * o_.checkpoint_every_steps);
  }
  if (o_.eval_every_steps > 0) {
    end = std::min(end, (step / o_.eval_every_steps + 1) * o_.eval_every_steps);
  }
  return end;
}

int64_t Runner::StretchEnd(int64_t step) const {
  const int64_t epoch_end = (step / steps_per_epoch_ + 1) * steps_per_epoch_;
  int64_t end = std::min(epoch_end, total_steps_);
  if (o_.checkpoint_every_steps > 0) {
    end = std::min(end, (step / o_.checkpoint_every_steps + 1) * o_.checkpoint_every_steps);
  }
  if (o_.eval_every_steps > 0) {
    end = std::min(end, (step / o_.eval_every_steps + 1) * o_.eval_every_steps);
  }
  return end;
}

absl::StatusOr<bool> Runner::RunStretch(int64_t* step_io, int64_t end) {
  const int64_t step = *step_io;
  membership_->set_step(step);
  RetireLeavers();
  // A streamed slot is cheap to read on and dear to skip into: its worker
  // keeps it (work_queue.h).
  const bool keep_slots = job::StreamsRecords(job_);
  WorkQueue queue(step, end, o_.unit_steps, initial_, keep_slots);
  for (const auto& [w, slot] : kept_slots_) queue.Follows(w, slot);
  absl::Time since = clock_->Now();
  int64_t at = step;
  UnitDispatcher::QueueHooks hooks;
  // The report is thread-compatible: the feeders' `done` and the
  // dispatching thread's `reached` take turns on it.
  absl::Mutex report_mu;
  hooks.done = [&](int worker, const Piece& piece, const proto::UnitMetrics& m) {
    absl::MutexLock lock(&report_mu);
    report_->AddUnit(worker, m);
    report_->AddPiece(worker, piece.first_step, piece.end, piece.slot, queue.num_slots(),
                      piece.push_as.value_or(-1));
  };
  hooks.admit = [&](const std::function<bool(int)>& may_admit) {
    return AdmitReturningWorkers(may_admit);
  };
  hooks.admit_poll = o_.heartbeat_poll;  // cheap: a probe only for a worker back (MayBeBack)
  // The progress line and the gauges follow the queue's frontier.
  hooks.reached = [&](int64_t frontier) {
    const absl::Time now = clock_->Now();
    absl::MutexLock lock(&report_mu);
    report_->UnitDone(frontier, frontier - at, now - since);
    since = now;
    at = frontier;
    membership_->set_step(frontier);
    PublishGauges(frontier);
  };
  hooks.stop = o_.interrupted;
  hooks.leave = [this](int w) { return Leave(w); };
  std::vector<absl::Status> failures;
  const absl::Status run = dispatcher_->RunQueue(job_.job_id(), &queue, hooks, &failures);
  if (keep_slots) kept_slots_ = queue.last_slots();
  if (membership_->live().empty()) return absl::UnavailableError("every worker is lost");
  if (absl::IsCancelled(run) && o_.interrupted && o_.interrupted()) {
    return absl::CancelledError(absl::StrCat("stopped at step ", queue.frontier()));
  }
  // A piece that failed with its worker alive: the job's own failure (it
  // ends the job), or the servers'.
  if (const absl::Status job_error = JobErrorOf(failures); !job_error.ok()) {
    return JobError(job_error, queue.frontier());
  }
  if (!run.ok()) {
    base::Logf("chief: the stretch from step %d failed while its workers answer (%s)", step,
               std::string(run.message()));
    PSC_ASSIGN_OR_RETURN(*step_io, recovery_->RestoreServers(run));
    return false;
  }
  *step_io = end;
  return true;
}

absl::StatusOr<bool> Runner::RunUnit(int64_t* step_io, int64_t end) {
  const int64_t step = *step_io;
  membership_->set_step(step);
  RetireLeavers();
  AdmitReturningWorkers([](int) { return true; });
  const std::vector<int> live = membership_->live();
  const bool backups = job::HasBackupWorkers(job_);
  if (!backups && job_.batch_size() % static_cast<int64_t>(live.size()) != 0) {
    return absl::FailedPreconditionError(absl::StrCat("--batch_size=", job_.batch_size(),
                                                      " does not split evenly over the ",
                                                      live.size(), " workers left"));
  }
  const absl::Time start = clock_->Now();
  Unit unit = MakeUnit(job_.job_id(), step, end, live);
  if (backups) PinSlotsToWorkers(&unit, initial_);
  if (collective()) NameGroup(&unit);
  const std::vector<absl::StatusOr<proto::UnitMetrics>> results = dispatcher_->Run(unit);
  if (membership_->live().empty()) return absl::UnavailableError("every worker is lost");
  // A slot that failed with its worker alive: the job's own failure (a
  // refused push, a diverged step: it ends the job), or the servers'.
  absl::Status server_failure = dispatcher_->first_failure();
  std::vector<absl::Status> failures;
  // A slot's examples per step (its share of what a step reads).
  const int64_t share = job::ExamplesReadPerStep(job_) / std::max(1, unit.requests[0].num_slots());
  if (backups) {
    // Pinned slots: a lost worker's slot is read by no one.
    report_->AddLost((initial_ - unit.num_slots()) * unit.num_steps() * share);
  }
  for (int i = 0; i < unit.num_slots(); ++i) {
    if (results[i].ok()) {
      report_->AddUnit(unit.workers[i], *results[i]);
      report_->AddPiece(unit.workers[i], unit.first_step, unit.end, unit.requests[i].replica_slot(),
                        unit.requests[i].num_slots(), -1);
    } else if (!membership_->lost(unit.workers[i])) {
      server_failure = MoreInformative(server_failure, results[i].status());
      failures.push_back(results[i].status());
    } else if (!collective()) {
      // Sync: its steps closed without it; what it trained died with it.
      report_->AddLost(unit.num_steps() * share);
    }
  }
  if (const absl::Status job_error = JobErrorOf(failures); !job_error.ok()) {
    return JobError(job_error, step);
  }
  if (collective()) {
    if (!server_failure.ok()) {
      PSC_ASSIGN_OR_RETURN(*step_io, Regroup(server_failure));
      // The steps the group completed before it failed are applied; their
      // metrics died with the unit.
      const int64_t done = std::clamp<int64_t>(*step_io - step, 0, unit.num_steps());
      for (int i = 0; i < unit.num_slots(); ++i) {
        if (!results[i].ok()) report_->AddLost(done * share);
      }
      return false;
    }
    regroups_in_a_row_ = 0;
  }
  // Sync: a lost worker's steps are closed without it (its slot's share of
  // them is left untrained, as TensorFlow's SyncReplicasOptimizer does);
  // the next units split the batch over the survivors.
  if (!server_failure.ok()) {
    base::Logf("chief: unit at step %d failed while its workers answer (%s)", step,
               std::string(server_failure.message()));
    PSC_ASSIGN_OR_RETURN(*step_io, recovery_->RestoreServers(server_failure));
    return false;
  }
  report_->UnitDone(end, end - step, clock_->Now() - start);
  *step_io = end;
  return true;
}

absl::Status Runner::AfterUnit(int64_t step) {
  if (!o_.checkpoint_dir.empty() && o_.checkpoint_every_steps > 0 &&
      step % o_.checkpoint_every_steps == 0) {
    PSC_RETURN_IF_ERROR(shards_->Checkpoint(o_.checkpoint_dir, step, WorkerState()));
    ++checkpoints_written_;
    last_checkpoint_step_ = step;
  }
  const bool epoch_end = step % steps_per_epoch_ == 0;
  if (epoch_end || (o_.eval_every_steps > 0 && step % o_.eval_every_steps == 0)) {
    PSC_ASSIGN_OR_RETURN(const job::SplitMetrics validation, Evaluate(data_.validation));
    PSC_RETURN_IF_ERROR(report_->AddEvaluation(step, validation));
    if (epoch_end) {
      PSC_RETURN_IF_ERROR(report_->EndEpoch(step, validation, servers_));
      PSC_RETURN_IF_ERROR(OnEpochEnd(step));
    }
  }
  return absl::OkStatus();
}

absl::Status Runner::OnEpochEnd(int64_t step) {
  if (report_->epochs().empty()) return absl::OkStatus();
  const job::EpochRecord& e = report_->epochs().back();
  const int64_t epoch = e.epoch - 1;  // Keras's 0-based index
  const job::EpochCallbacks::Verdict v =
      callbacks_->OnEpochEnd(epoch, job::LogsOf(e), learning_rate_);
  if (v.learning_rate.has_value()) {
    // ReduceLROnPlateau: every shard applies the new rate from the next
    // step on, and keeps it in its checkpoints.
    proto::UpdateMembershipRequest r;
    r.set_learning_rate(*v.learning_rate);
    for (int shard = 0; shard < servers_->num_shards(); ++shard) {
      proto::UpdateMembershipResponse response;
      PSC_RETURN_IF_ERROR(servers_->UpdateMembership(shard, r, &response));
    }
    base::Logf("chief: epoch %d: %s did not improve for %d epoch(s); learning rate %g -> %g",
               e.epoch, job_.callbacks().reduce_lr_monitor(), job_.callbacks().reduce_lr_patience(),
               learning_rate_, *v.learning_rate);
    learning_rate_ = *v.learning_rate;
    report_->set_learning_rate(learning_rate_);
  }
  if (v.export_now) {
    // The tables read by rows as they are written (ServerWeights).
    PSC_ASSIGN_OR_RETURN(
        std::unique_ptr<ServerWeights> weights,
        ServerWeights::Create(&job_, model_.get(), servers_, sharded_.get(),
                              /*with_optimizer=*/false, learning_rate_, kPullTimeout));
    job::ExportOptions best;
    best.keras = callbacks_->export_best();
    PSC_RETURN_IF_ERROR(job::ExportModel(best, job::ModelConfigJson(job_), *model_, weights.get(),
                                         job::RecordedPreprocessing(data_record_)));
    base::Logf("chief: epoch %d: %s improved; exported to %s", e.epoch,
               job_.callbacks().export_monitor(), best.keras);
  }
  if (v.keep_weights) {
    // Never with row tables (job::CheckRowTableOptions).
    PSC_ASSIGN_OR_RETURN(best_params_, shards_->PullAll(kPullTimeout));
  }
  if (v.stop) {
    stop_.stopped_epoch = e.epoch;
    stop_.reason = v.why;
    base::Logf("chief: %s", v.why);
    total_steps_ = step;  // training ends here
  }
  return absl::OkStatus();
}

absl::StatusOr<job::SplitMetrics> Runner::Evaluate(const data::Split& split) {
  return eval_->Evaluate(split, kPullTimeout);
}

absl::StatusOr<job::JobResult> Runner::Finish() {
  PSC_RETURN_IF_ERROR(shards_->CloseOpenStep());
  if (!o_.checkpoint_dir.empty() &&
      (o_.checkpoint_every_steps == 0 || total_steps_ % o_.checkpoint_every_steps != 0)) {
    PSC_RETURN_IF_ERROR(shards_->Checkpoint(o_.checkpoint_dir, total_steps_, WorkerState()));
    ++checkpoints_written_;
  }
  JobReport::Final final;
  // Whole variables only for the best epoch's (a job without row tables).
  // Otherwise the evaluation pulls a batch's rows of each table, and the
  // digest and the export read them in chunks.
  std::vector<std::vector<float>> params;
  if (callbacks_->restore_best_weights() && !best_params_.empty()) {
    // Keras's restore_best_weights: the model is the best epoch's. The
    // servers (and the last checkpoint) keep the last step's.
    params = best_params_;
    stop_.best_epoch = callbacks_->best_epoch() + 1;
    stop_.restored_best_weights = true;
    base::Logf("chief: restoring the weights of the best epoch, %d", stop_.best_epoch);
  }
  final.stop = stop_;
  if (stop_.restored_best_weights) {
    PSC_ASSIGN_OR_RETURN(final.test, eval_->EvaluateWith(params, data_.test));
    std::vector<std::pair<std::string, absl::Span<const float>>> named;
    for (size_t v = 0; v < params.size(); ++v) {
      named.emplace_back(model_->variables()[v].name, params[v]);
    }
    final.variables_sha256 = job::VariablesSha256(named);
  } else {
    PSC_ASSIGN_OR_RETURN(final.test, eval_->Evaluate(data_.test, kPullTimeout));
    PSC_ASSIGN_OR_RETURN(final.variables_sha256, eval_->Sha256(kPullTimeout));
  }
  // The .keras model says what ran.
  proto::OptimizerConfig ran = job_.optimizer();
  ran.set_learning_rate(learning_rate_);
  const proto::OptimizerConfig* compiled = o_.exports.keras.empty() ? nullptr : &ran;
  if (stop_.restored_best_weights) {
    PSC_RETURN_IF_ERROR(job::ExportModel(o_.exports, job::ModelConfigJson(job_), *model_, params,
                                         job::RecordedPreprocessing(data_record_), compiled));
  } else if (!o_.exports.keras.empty() || !o_.exports.weights.empty()) {
    // The servers' variables and, for a .keras model, the optimizer's state
    // (slots, iterations, the rate now), so that Keras's fit continues from
    // the export.
    PSC_ASSIGN_OR_RETURN(std::unique_ptr<ServerWeights> weights,
                         ServerWeights::Create(&job_, model_.get(), servers_, sharded_.get(),
                                               compiled != nullptr, learning_rate_, kPullTimeout));
    PSC_RETURN_IF_ERROR(job::ExportModel(o_.exports, job::ModelConfigJson(job_), *model_,
                                         weights.get(), job::RecordedPreprocessing(data_record_),
                                         compiled,
                                         compiled ? &weights->optimizer_state() : nullptr));
  }
  final.checkpoints_written = checkpoints_written_;
  final.workers_lost = membership_->workers_lost();
  final.recoveries = recovery_->recoveries();
  final.workers_joined = membership_->workers_joined();
  final.workers_rejoined = membership_->workers_rejoined();
  final.workers_drained = membership_->workers_drained();
  for (const Membership::Change& c : membership_->changes()) {
    final.membership.push_back({c.step, c.worker, c.change, c.why});
  }
  final.regroups = regroups_;
  PSC_ASSIGN_OR_RETURN(job::JobResult result, report_->Finish(final, servers_));
  job::SetJob(job_, start_, &result);
  result.data = data_record_;
  {  // the chief's (validation, test, damage) and the workers', per file
    std::map<std::string, int64_t> skipped = report_->RecordsSkipped();
    for (const auto& [path, n] : data_record_.records_skipped) skipped[path] += n;
    result.data.records_skipped.assign(skipped.begin(), skipped.end());
  }
  result.eval_every_steps = o_.eval_every_steps;
  return result;
}

absl::StatusOr<job::JobResult> Runner::Run() {
  const absl::Time start = clock_->Now();
  start_ = start;
  PSC_RETURN_IF_ERROR(Setup());
  // The workers first: a worker still running a unit of a previous chief
  // (killed and restarted at once) cancels it in StartJob, so that no
  // orphaned push lands after the servers are restored below.
  for (int w = 0; w < initial_; ++w) {
    PSC_RETURN_IF_ERROR(workers_->StartJob(w, job_));
  }
  PSC_ASSIGN_OR_RETURN(int64_t step, StartServers());
  if (collective()) {
    // A replica's version counts its steps; a checkpoint of an async or ssp
    // run (one ps: the same placement) counts pushes instead.
    PSC_ASSIGN_OR_RETURN(const proto::ShardStats stats, servers_->GetStats(0));
    if (stats.version() != step) {
      return absl::FailedPreconditionError(absl::StrCat(
          "the checkpoint of step ", step, " holds version ", stats.version(),
          " (written by an async or ssp run): multi_worker_mirrored resumes only from a sync "
          "checkpoint"));
    }
  }
  if (!o_.logdir.empty()) {
    // Keras's runs: one directory each, so TensorBoard overlays them.
    PSC_ASSIGN_OR_RETURN(train_events_, summary::EventWriter::Create(o_.logdir + "/train"));
    PSC_ASSIGN_OR_RETURN(validation_events_,
                         summary::EventWriter::Create(o_.logdir + "/validation"));
    PSC_ASSIGN_OR_RETURN(test_events_, summary::EventWriter::Create(o_.logdir + "/test"));
  }
  JobReportOptions report;
  report.job = &job_;
  report.num_ps = collective() ? 0 : servers_->num_shards();
  report.num_workers = initial_;
  report.steps_per_epoch = steps_per_epoch_;
  report.progress = o_.progress;
  report.train_events = train_events_.get();
  report.validation_events = validation_events_.get();
  report.test_events = test_events_.get();
  report.clock = clock_;
  report.start = start;
  report.first_step = step;
  report.gauges = o_.gauges;
  report_ = std::make_unique<JobReport>(report);
  // The rate the servers apply: the job's, or a reduced one a restored
  // checkpoint brought back.
  learning_rate_ = job_.optimizer().learning_rate();
  if (!collective()) {
    PSC_ASSIGN_OR_RETURN(const proto::ShardStats stats0, servers_->GetStats(0));
    if (stats0.learning_rate() > 0) learning_rate_ = stats0.learning_rate();
  }
  report_->set_learning_rate(learning_rate_);
  PublishGauges(step);
  for (;;) {
    while (step < total_steps_) {
      PSC_ASSIGN_OR_RETURN(const bool done, queued() ? RunStretch(&step, StretchEnd(step))
                                                     : RunUnit(&step, UnitEnd(step)));
      PublishGauges(step);
      if (!done) {  // the servers were restored, or the group formed again: redo from there
        if (o_.stop_after_unit && o_.stop_after_unit(step)) {
          return absl::CancelledError(absl::StrCat("stopped at step ", step));
        }
        continue;
      }
      if (absl::Status after = AfterUnit(step); !after.ok()) {
        PSC_ASSIGN_OR_RETURN(step, RecoverBetweenUnits(after));
        continue;
      }
      if (o_.stop_after_unit && o_.stop_after_unit(step)) {
        return absl::CancelledError(absl::StrCat("stopped after step ", step));
      }
    }
    absl::StatusOr<job::JobResult> result = Finish();
    PublishGauges(step);
    if (result.ok()) return result;
    PSC_ASSIGN_OR_RETURN(step, RecoverBetweenUnits(result.status()));
  }
}

void Runner::PublishGauges(int64_t step) {
  const int64_t live = static_cast<int64_t>(membership_->live().size());
  const int64_t joined_new = membership_->workers_joined() - membership_->workers_rejoined();
  report_->set_workers(live, initial_, membership_->workers_lost(), membership_->workers_rejoined(),
                       joined_new, membership_->workers_drained());
  if (o_.gauges == nullptr) return;
  o_.gauges->Update([&](JobGauges::Snapshot* g) {
    g->step = step;
    g->total_steps = total_steps_;
    g->epochs = job_.epochs();
    if (g->epoch == 0) g->epoch = std::min(step / steps_per_epoch_ + 1, job_.epochs());
    g->workers = initial_;
    g->workers_live = live;
    g->workers_lost = membership_->workers_lost();
    g->workers_rejoined = membership_->workers_rejoined();
    g->workers_joined_new = joined_new;
    g->workers_drained = membership_->workers_drained();
    g->recoveries = recovery_->recoveries();
    g->checkpoints = checkpoints_written_;
  });
}

absl::StatusOr<int64_t> Runner::RecoverBetweenUnits(const absl::Status& failure) {
  for (int shard = 0; shard < servers_->num_shards(); ++shard) {
    absl::StatusOr<proto::ShardStats> stats = servers_->GetStats(shard);
    if (!stats.ok() || stats->num_variables() == 0) {
      base::Logf("chief: ps:%d %s after: %s", shard,
                 stats.ok() ? "restarted without its variables" : "does not answer",
                 std::string(failure.message()));
      return recovery_->RestoreServers(failure);
    }
  }
  return failure;  // every server holds its state: not theirs
}

void Runner::NameGroup(Unit* unit) {
  if (unit->workers != group_members_) {
    ++generation_;
    group_members_ = unit->workers;
  }
  const std::string prefix = absl::StrCat(job_.job_id(), "/", run_nonce_, "/g", generation_, "/");
  for (proto::RunUnitRequest& r : unit->requests) r.mutable_group()->set_prefix(prefix);
}

absl::Status Runner::CopyReplica(int src, int dst, int64_t step) {
  proto::ExportStateRequest out;
  out.set_step(step);
  *out.mutable_placement() = job_.placement();
  proto::ExportStateResponse state;
  PSC_RETURN_IF_ERROR(group_->replica(src)->ExportState(0, out, &state));
  proto::ImportStateRequest in;
  in.set_step(step);
  *in.mutable_state() = std::move(*state.mutable_state());
  proto::ImportStateResponse imported;
  PSC_RETURN_IF_ERROR(group_->replica(dst)->ImportState(0, in, &imported));
  if (imported.version() != step) {
    return absl::InternalError(absl::StrCat("worker:", dst, "'s replica is at ", imported.version(),
                                            " after taking step ", step, " from worker:", src));
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> Runner::Regroup(const absl::Status& failure) {
  ++regroups_;
  if (++regroups_in_a_row_ > o_.max_regroups) {
    return absl::Status(failure.code(),
                        absl::StrCat("the collective group failed ", o_.max_regroups,
                                     " times in a row; the last time: ", failure.message()));
  }
  group_members_.clear();  // the next unit forms a new group
  // A worker lost while the replicas are compared or copied is left out and
  // the comparison starts again (bounded: each round loses a worker, or
  // ends).
  for (int round = 0; round <= workers_->num_workers(); ++round) {
    std::vector<std::pair<int, int64_t>> steps;
    for (int w : membership_->live()) {
      absl::StatusOr<proto::ShardStats> stats = group_->replica(w)->GetStats(0);
      if (stats.ok() && stats->num_variables() == 0) {
        // A process restarted before its loss was noticed: it answers with
        // an empty replica. It gets the job and a peer's state below.
        absl::Status ready = workers_->StartJob(w, job_);
        if (ready.ok()) ready = group_->ConfigureReplica(w);
        if (!ready.ok()) stats = ready;
        if (stats.ok()) stats->set_version(-1);
      }
      if (!stats.ok()) {
        // Judged as after a failed unit: left out if it no longer answers.
        if (membership_->JudgeFailedUnit(w, stats.status()).ok()) return stats.status();
        continue;
      }
      steps.emplace_back(w, stats->version());
    }
    if (steps.empty()) return absl::UnavailableError("every worker is lost");
    auto furthest = std::max_element(steps.begin(), steps.end(), [](const auto& a, const auto& b) {
      return a.second < b.second;
    });
    const int source = furthest->first;
    const int64_t step = furthest->second;
    if (step < 0) return absl::FailedPreconditionError("no live worker holds a replica");
    int copied = 0;
    bool lost_one = false;
    for (const auto& [w, at] : steps) {
      if (at == step) continue;
      if (at >= 0 && at != step - 1) {
        base::Logf("chief: worker:%d's replica is at step %d, %d behind worker:%d's", w, at,
                   step - at, source);
      }
      if (absl::Status s = CopyReplica(source, w, step); !s.ok()) {
        const bool source_lost = !membership_->JudgeFailedUnit(source, s).ok();
        const bool target_lost = !membership_->JudgeFailedUnit(w, s).ok();
        if (!source_lost && !target_lost) return s;
        lost_one = true;
        break;
      }
      ++copied;
    }
    if (lost_one) continue;
    base::Logf(
        "chief: %d worker(s) go on from step %d in a new group (%d replica(s) given "
        "worker:%d's state) after: %s",
        static_cast<int>(steps.size()), step, copied, source, std::string(failure.message()));
    return step;
  }
  return absl::UnavailableError("workers kept being lost while the group was formed again");
}

std::vector<int> Runner::AdmitReturningWorkers(const std::function<bool(int)>& may_admit) {
  std::vector<int> admitted;
  // A worker out of the job that asks to leave (one that joined and waits
  // for a slot, a lost one) is answered at once: no unit of it runs.
  if (o_.registry != nullptr) {
    for (int w = 0; w < workers_->num_workers(); ++w) {
      if (membership_->lost(w) && membership_->Leaving(w)) {
        o_.registry->AnswerLeave(w, absl::OkStatus());
      }
    }
  }
  // A lost worker is asked at most every join_poll: a hung one takes the
  // whole call's deadline to not answer.
  next_join_check_.resize(workers_->num_workers(), absl::InfinitePast());
  const absl::Time now = clock_->Now();
  // Where the batch is split over the live workers (sync without backup
  // workers, multi_worker_mirrored), a member more must still split it
  // evenly; else it waits. Elsewhere the slots are fixed.
  const bool splits =
      collective() || (job_.policy().mode() == proto::MODE_SYNC && !job::HasBackupWorkers(job_));
  // In sync a step has R = initial_ slots: a worker more takes a vacant one
  // (a lost or drained worker's), else it waits. async and ssp take any
  // number of workers over the same R slots.
  const bool slots_bound = collective() || job_.policy().mode() == proto::MODE_SYNC;
  for (int w = 0; w < workers_->num_workers(); ++w) {
    if (!membership_->lost(w) || now < next_join_check_[w] || !membership_->MayBeBack(w)) {
      continue;
    }
    // multi_worker_mirrored's groups are its TF_CONFIG's workers.
    if (collective() && w >= initial_) continue;
    const std::vector<int> live = membership_->live();
    if (slots_bound && static_cast<int>(live.size()) >= initial_) continue;
    if (splits && job_.batch_size() % static_cast<int64_t>(live.size() + 1) != 0) continue;
    if (w >= initial_ && o_.registry != nullptr) {
      // A seat: reached at the address it joined from.
      const std::optional<TaskRecord> r = o_.registry->Get(cluster::TaskType::kWorker, w);
      if (!r.has_value()) continue;
      if (absl::Status s = workers_->SetAddress(w, r->task.address.ToString()); !s.ok()) continue;
    }
    if (!may_admit(w)) continue;
    // A worker that does not answer is asked again after twice as long
    // each time (from join_poll up to 16 join_polls apart).
    join_misses_.resize(workers_->num_workers(), 0);
    next_join_check_[w] = now + o_.join_poll * (1 << std::min(join_misses_[w], 4));
    if (!workers_->Alive(w)) {
      // A worker that just joined may not serve yet (it joins first): it
      // is asked again soon, without backing off.
      if (membership_->vacant(w)) {
        next_join_check_[w] = now + std::min(o_.join_poll, o_.heartbeat_poll);
      } else {
        ++join_misses_[w];
      }
      continue;
    }
    absl::Status s = [&]() -> absl::Status {
      PSC_RETURN_IF_ERROR(workers_->StartJob(w, job_));
      if (collective()) {
        if (live.empty()) return absl::UnavailableError("no live worker to copy a replica from");
        PSC_RETURN_IF_ERROR(group_->ConfigureReplica(w));
        PSC_ASSIGN_OR_RETURN(const proto::ShardStats stats, group_->replica(live[0])->GetStats(0));
        PSC_RETURN_IF_ERROR(CopyReplica(live[0], w, stats.version()));
      }
      return membership_->Rejoin(w);
    }();
    if (!s.ok()) {
      ++join_misses_[w];
      base::Logf("chief: worker:%d answers again but cannot join yet: %s", w,
                 std::string(s.message()));
      continue;
    }
    join_misses_[w] = 0;
    admitted.push_back(w);
  }
  return admitted;
}

bool Runner::Leave(int w) {
  if (o_.registry == nullptr) return false;
  absl::MutexLock lock(&leave_mu_);
  const std::vector<int> live = membership_->live();
  if (std::find(live.begin(), live.end(), w) == live.end()) {
    o_.registry->AnswerLeave(w, absl::OkStatus());  // out of the job already
    return true;
  }
  const bool splits =
      collective() || (job_.policy().mode() == proto::MODE_SYNC && !job::HasBackupWorkers(job_));
  // Checked with the losses held off: a worker lost meanwhile counts.
  absl::Status refused;
  absl::Status told = membership_->Retire(w, [&](int left) {
    if (left == 0) {
      refused = absl::FailedPreconditionError(
          absl::StrCat("worker:", w,
                       " is the job's last worker and cannot leave while the job runs (stop the "
                       "chief to end the job; its checkpoints resume it)"));
    } else if (splits && job_.batch_size() % left != 0) {
      refused = absl::FailedPreconditionError(absl::StrCat(
          "worker:", w, " cannot leave: the ", left,
          " workers left would not split --batch_size=", job_.batch_size(), " evenly"));
    }
    return refused;
  });
  if (!refused.ok()) {
    base::Logf("chief: %s", std::string(refused.message()));
    o_.registry->AnswerLeave(w, refused);
    return false;
  }
  if (!told.ok() && !membership_->lost(w)) {  // lost meanwhile: out of the job anyway
    base::Logf("chief: worker:%d cannot leave now: %s", w, std::string(told.message()));
    return false;
  }
  if (!told.ok()) base::Logf("chief: worker:%d leaves: %s", w, std::string(told.message()));
  o_.registry->AnswerLeave(w, absl::OkStatus());
  return true;
}

void Runner::RetireLeavers() {
  for (int w : membership_->live()) {
    if (membership_->Leaving(w)) Leave(w);
  }
}

}  // namespace

absl::StatusOr<job::JobResult> RunJob(const JobRunnerOptions& options,
                                      ps_client::ParameterClient* servers, WorkerClient* workers) {
  Runner runner(options, servers, workers);
  return runner.Run();
}

}  // namespace chief
}  // namespace psc
