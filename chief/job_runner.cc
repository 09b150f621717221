#include "chief/job_runner.h"

#include <algorithm>
#include <cmath>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/base/logging.h"
#include "common/compute/cpu_backend.h"
#include "common/compute/model.h"
#include "common/data/batch_plan.h"
#include "common/data/dataset.h"
#include "common/job/evaluation.h"
#include "common/job/job_flags.h"
#include "common/placement/placement.h"
#include "common/ps_client/sharded_parameters.h"
#include "common/summary/tensorboard.h"

namespace psc {
namespace chief {
namespace {

constexpr int64_t kMaxRecoveries = 10;

struct Aggregate {
  int64_t accepted = 0, applied = 0, stale = 0, discarded = 0, staleness_max = 0;
  double staleness_sum = 0;
  std::vector<int64_t> histogram;
};

Aggregate Collect(ps_client::ParameterClient* servers) {
  Aggregate a;
  for (int s = 0; s < servers->num_shards(); ++s) {
    auto stats = servers->GetStats(s);
    if (!stats.ok()) continue;
    // Every push goes to every shard: count gradients once (shard 0's view),
    // but staleness over all shards' applies.
    if (s == 0) {
      a.accepted = stats->pushes_accepted();
      a.applied = stats->gradients_applied();
      a.stale = stats->gradients_dropped_stale();
      a.discarded = stats->gradients_discarded();
    }
    a.staleness_max = std::max(a.staleness_max, stats->staleness_max());
    a.staleness_sum += stats->staleness_sum();
    a.histogram.resize(std::max<size_t>(a.histogram.size(), stats->staleness_histogram_size()), 0);
    for (int i = 0; i < stats->staleness_histogram_size(); ++i) {
      a.histogram[i] += stats->staleness_histogram(i);
    }
  }
  return a;
}

class Runner {
 public:
  Runner(const JobRunnerOptions& options, ps_client::ParameterClient* servers,
         WorkerClient* workers)
      : o_(options), job_(options.job), servers_(servers), workers_(workers) {}

  absl::StatusOr<job::JobResult> Run();

 private:
  absl::Status Setup();
  absl::StatusOr<int64_t> InitializeOrRestore();
  absl::Status Checkpoint(int64_t step);
  absl::StatusOr<job::SplitMetrics> Evaluate(const data::Split& split);
  absl::StatusOr<std::vector<std::vector<float>>> PullAll();

  const JobRunnerOptions& o_;
  proto::JobSpec job_;
  ps_client::ParameterClient* servers_;
  WorkerClient* workers_;
  std::unique_ptr<compute::Model> model_;
  std::unique_ptr<ps_client::ShardedParameters> sharded_;
  std::unique_ptr<compute::ComputeBackend> backend_;
  std::unique_ptr<compute::Executor> executor_;
  data::FashionMnist data_;
  absl::Status ConfigureShards();
  // Tells every shard the live workers (and, in sync, to aggregate one
  // gradient per live worker), completing a step that now has enough.
  absl::Status UpdateMembership(const std::vector<int>& live);
  // After a failed unit whose workers still answer: wait for the servers,
  // configure them and restore the latest checkpoint. Returns its step.
  absl::StatusOr<int64_t> RecoverServers(const std::vector<int>& live);

  int64_t steps_per_epoch_ = 0;
  int64_t checkpoints_written_ = 0;
};

absl::Status Runner::ConfigureShards() {
  for (int s = 0; s < servers_->num_shards(); ++s) {
    proto::ConfigureRequest c;
    c.set_shard_index(s);
    c.set_num_shards(servers_->num_shards());
    *c.mutable_policy() = job_.policy();
    *c.mutable_optimizer() = job_.optimizer();
    c.set_num_workers(workers_->num_workers());
    c.set_job_id(job_.job_id());
    if (absl::Status st = servers_->Configure(s, c); !st.ok()) return st;
  }
  return absl::OkStatus();
}

absl::Status Runner::UpdateMembership(const std::vector<int>& live) {
  proto::UpdateMembershipRequest m;
  if (job_.policy().mode() == proto::MODE_SYNC) {
    m.set_replicas_to_aggregate(static_cast<int32_t>(live.size()));
  }
  for (int w : live) m.add_live_workers(w);
  m.set_partial(proto::UpdateMembershipRequest::COMPLETE);
  for (int s = 0; s < servers_->num_shards(); ++s) {
    proto::UpdateMembershipResponse r;
    if (absl::Status st = servers_->UpdateMembership(s, m, &r); !st.ok()) return st;
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> Runner::RecoverServers(const std::vector<int>& live) {
  if (o_.checkpoint_dir.empty()) {
    return absl::UnavailableError(
        "a parameter server failed and there is no checkpoint to recover from "
        "(run with --checkpoint_dir and --checkpoint_every_steps)");
  }
  const absl::Time deadline = absl::Now() + o_.server_recovery_timeout;
  for (int s = 0; s < servers_->num_shards(); ++s) {
    for (;;) {
      auto stats = servers_->GetStats(s);
      if (stats.ok()) break;
      if (absl::Now() >= deadline) {
        return absl::UnavailableError(absl::StrCat("ps:", s, " did not come back within ",
                                                   absl::FormatDuration(o_.server_recovery_timeout),
                                                   ": ", stats.status().message()));
      }
    }
  }
  if (absl::Status st = ConfigureShards(); !st.ok()) return st;
  if (absl::Status st = UpdateMembership(live); !st.ok()) return st;
  int64_t step = -1;
  for (int s = 0; s < servers_->num_shards(); ++s) {
    proto::RestoreCheckpointRequest req;
    req.set_directory(o_.checkpoint_dir);
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
  base::Logf("chief: a parameter server failed; restored every shard from %s step %d",
             o_.checkpoint_dir, step);
  return step;
}

absl::Status Runner::Setup() {
  auto model = compute::Model::Create(job_.model());
  if (!model.ok()) return model.status();
  model_ = std::make_unique<compute::Model>(*std::move(model));
  auto placement = placement::PlaceVariables(model_->variables(), {servers_->num_shards()});
  if (!placement.ok()) return placement.status();
  *job_.mutable_placement() = *placement;
  auto sharded = ps_client::ShardedParameters::Create(*placement, model_->variables());
  if (!sharded.ok()) return sharded.status();
  sharded_ = std::make_unique<ps_client::ShardedParameters>(*std::move(sharded));
  job_.set_num_replicas(workers_->num_workers());
  if (job_.job_id().empty()) {
    job_.set_job_id(
        absl::StrCat(job_.model(), "-", job::ModeName(job_.policy().mode()), "-seed", job_.seed()));
  }
  data::DatasetOptions data_options;
  data_options.data_dir = job_.data_dir();
  data_options.max_train_examples = job_.max_train_examples();
  auto data = data::LoadFashionMnist(data_options);
  if (!data.ok()) return data.status();
  data_ = *std::move(data);
  data::BatchPlanOptions plan_options;
  plan_options.num_examples = data_.train.count;
  plan_options.batch_size = job_.batch_size();
  plan_options.steps_per_epoch = job_.steps_per_epoch();
  auto plan = data::BatchPlan::Create(plan_options);
  if (!plan.ok()) return plan.status();
  steps_per_epoch_ = plan->steps_per_epoch();
  if (job_.batch_size() % workers_->num_workers() != 0) {
    return absl::InvalidArgumentError(absl::StrCat("--batch_size=", job_.batch_size(),
                                                   " does not split evenly over ",
                                                   workers_->num_workers(), " workers"));
  }
  auto backend = compute::CreateCpuBackend(o_.eval_threads);
  if (!backend.ok()) return backend.status();
  backend_ = *std::move(backend);
  auto executor = compute::Executor::Create(model_.get(), backend_.get());
  if (!executor.ok()) return executor.status();
  executor_ = *std::move(executor);

  return ConfigureShards();
}

absl::StatusOr<int64_t> Runner::InitializeOrRestore() {
  if (!o_.checkpoint_dir.empty()) {
    std::vector<int64_t> steps;
    absl::Status first_error;
    for (int s = 0; s < servers_->num_shards(); ++s) {
      proto::RestoreCheckpointRequest req;
      req.set_directory(o_.checkpoint_dir);
      req.set_step(-1);
      proto::RestoreCheckpointResponse resp;
      absl::Status st = servers_->RestoreCheckpoint(s, req, &resp);
      if (st.ok()) {
        if (absl::Status same = placement::CheckSamePlacement(resp.placement(), job_.placement());
            !same.ok()) {
          return same;
        }
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
                                                o_.checkpoint_dir, " are of different steps"));
      }
      base::Logf("chief: restored every shard from %s step %d", o_.checkpoint_dir, steps[0]);
      return steps[0];
    }
  }
  std::vector<std::vector<proto::NamedTensor>> split;
  sharded_->Split(model_->Initialize(job_.seed()), &split);
  for (int s = 0; s < servers_->num_shards(); ++s) {
    proto::CreateVariablesRequest req;
    for (auto& t : split[s]) *req.add_variables() = std::move(t);
    if (absl::Status st = servers_->CreateVariables(s, req); !st.ok()) return st;
  }
  return 0;
}

absl::Status Runner::Checkpoint(int64_t step) {
  for (int s = 0; s < servers_->num_shards(); ++s) {
    proto::SaveCheckpointRequest req;
    req.set_directory(o_.checkpoint_dir);
    req.set_step(step);
    *req.mutable_placement() = job_.placement();
    proto::SaveCheckpointResponse resp;
    if (absl::Status st = servers_->SaveCheckpoint(s, req, &resp); !st.ok()) return st;
  }
  ++checkpoints_written_;
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::vector<float>>> Runner::PullAll() {
  std::vector<proto::PullRequest> requests(servers_->num_shards());
  std::vector<proto::PullResponse> responses;
  if (absl::Status s = servers_->PullAll(requests, &responses, absl::Minutes(2)); !s.ok()) return s;
  std::vector<const google::protobuf::RepeatedPtrField<proto::NamedTensor>*> parts;
  for (const auto& r : responses) parts.push_back(&r.variables());
  std::vector<std::vector<float>> params;
  if (absl::Status s = sharded_->Assemble(parts, &params); !s.ok()) return s;
  return params;
}

absl::StatusOr<job::SplitMetrics> Runner::Evaluate(const data::Split& split) {
  auto params = PullAll();
  if (!params.ok()) return params.status();
  if (absl::Status s = executor_->SetParameters(*params); !s.ok()) return s;
  return job::EvaluateSplit(executor_.get(), split);
}

absl::StatusOr<job::JobResult> Runner::Run() {
  const absl::Time start = absl::Now();
  if (absl::Status s = Setup(); !s.ok()) return s;
  auto first = InitializeOrRestore();
  if (!first.ok()) return first.status();
  std::unique_ptr<summary::EventWriter> events;
  if (!o_.logdir.empty()) {
    auto writer = summary::EventWriter::Create(o_.logdir);
    if (!writer.ok()) return writer.status();
    events = *std::move(writer);
  }
  const int num_workers = workers_->num_workers();
  for (int w = 0; w < num_workers; ++w) {
    if (absl::Status s = workers_->StartJob(w, job_); !s.ok()) return s;
  }
  const int64_t total = steps_per_epoch_ * job_.epochs();
  std::vector<int> live;
  for (int w = 0; w < num_workers; ++w) live.push_back(w);
  int64_t workers_lost = 0, recoveries = 0;
  double compute_s = 0, comm_s = 0;  // summed over workers
  job::JobResult result;
  result.mode = job::ModeName(job_.policy().mode());
  result.model = job_.model();
  result.num_ps = servers_->num_shards();
  result.num_workers = num_workers;
  result.batch_size = job_.batch_size();
  double train_seconds = 0;
  int64_t trained_steps = 0;
  int64_t step = *first;
  double loss = 0;
  int64_t correct = 0, examples = 0;
  absl::Time epoch_start = absl::Now();
  while (step < total) {
    const int64_t epoch_end = (step / steps_per_epoch_ + 1) * steps_per_epoch_;
    int64_t end = std::min({epoch_end, step + std::max<int64_t>(1, o_.unit_steps), total});
    if (o_.checkpoint_every_steps > 0) {
      end = std::min(end, (step / o_.checkpoint_every_steps + 1) * o_.checkpoint_every_steps);
    }
    if (job_.batch_size() % static_cast<int64_t>(live.size()) != 0) {
      return absl::FailedPreconditionError(absl::StrCat("--batch_size=", job_.batch_size(),
                                                        " does not split evenly over the ",
                                                        live.size(), " workers left"));
    }
    const absl::Time unit_start = absl::Now();
    const std::vector<int> slots = live;  // slot i of this unit is worker slots[i]
    const int num_slots = static_cast<int>(slots.size());
    std::vector<absl::StatusOr<proto::UnitMetrics>> results(num_slots,
                                                            absl::UnknownError("not run"));
    absl::Mutex membership_mu;
    std::vector<std::thread> threads;
    for (int i = 0; i < num_slots; ++i) {
      threads.emplace_back([&, i] {
        const int w = slots[i];
        proto::RunUnitRequest unit;
        unit.set_job_id(job_.job_id());
        unit.set_unit(step);  // a unit is named by its first step
        unit.set_first_step(step);
        unit.set_num_steps(end - step);
        unit.set_replica_slot(i);
        unit.set_num_slots(num_slots);
        results[i] = workers_->RunUnit(w, unit);
        if (results[i].ok() || workers_->Alive(w)) return;
        // The worker is gone. Tell the shards now: in sync the survivors'
        // current step is waiting for its gradient.
        absl::MutexLock lock(&membership_mu);
        live.erase(std::remove(live.begin(), live.end(), w), live.end());
        ++workers_lost;
        base::Logf("chief: worker:%d is lost (%s); %d worker(s) go on", w,
                   std::string(results[i].status().message()), live.size());
        if (!live.empty()) {
          if (absl::Status st = UpdateMembership(live); !st.ok()) {
            base::Logf("chief: telling the servers: %s", std::string(st.message()));
          }
        }
      });
    }
    for (auto& t : threads) t.join();
    if (live.empty()) return absl::UnavailableError("every worker is lost");
    bool server_failure = false;
    absl::Status failure;
    for (int i = 0; i < num_slots; ++i) {
      if (!results[i].ok()) {
        const bool lost = std::find(live.begin(), live.end(), slots[i]) == live.end();
        if (!lost) {
          server_failure = true;
          failure = results[i].status();
        }
        continue;
      }
      loss += results[i]->loss_sum();
      correct += results[i]->correct();
      examples += results[i]->examples();
      compute_s += results[i]->compute_seconds();
      comm_s += results[i]->comm_seconds();
    }
    // Async and ssp: the lost workers' units go to a survivor, pushing as
    // the lost worker, so the steps it had pushed are duplicates and every
    // step of its slot is applied exactly once. (Sync steps are closed: the
    // survivors' steps completed without it.)
    if (!server_failure && job_.policy().mode() != proto::MODE_SYNC) {
      for (int i = 0; i < num_slots && !live.empty(); ++i) {
        if (results[i].ok() || workers_->Alive(slots[i])) continue;
        proto::RunUnitRequest unit;
        unit.set_job_id(job_.job_id());
        unit.set_unit(step);
        unit.set_first_step(step);
        unit.set_num_steps(end - step);
        unit.set_replica_slot(i);
        unit.set_num_slots(num_slots);
        unit.set_push_as_worker(slots[i]);
        const int heir = live[i % live.size()];
        auto redone = workers_->RunUnit(heir, unit);
        if (!redone.ok()) {
          server_failure = workers_->Alive(heir);
          failure = redone.status();
          if (!server_failure) return redone.status();
          break;
        }
        base::Logf("chief: worker:%d redid worker:%d's unit at step %d", heir, slots[i], step);
        loss += redone->loss_sum();
        correct += redone->correct();
        examples += redone->examples();
      }
    }
    if (server_failure) {
      base::Logf("chief: unit at step %d failed while its workers answer (%s)", step,
                 std::string(failure.message()));
      if (recoveries >= kMaxRecoveries) {
        return absl::Status(failure.code(),
                            absl::StrCat("giving up after ", recoveries,
                                         " recoveries; last failure: ", failure.message()));
      }
      auto restored = RecoverServers(live);
      if (!restored.ok()) return restored.status();
      ++recoveries;
      step = *restored;
      continue;
    }
    train_seconds += absl::ToDoubleSeconds(absl::Now() - unit_start);
    trained_steps += end - step;
    step = end;
    if (o_.progress != nullptr && examples > 0) {
      const double elapsed = absl::ToDoubleSeconds(absl::Now() - epoch_start);
      o_.progress->Step((step - 1) / steps_per_epoch_ + 1, job_.epochs(),
                        step - (step - 1) / steps_per_epoch_ * steps_per_epoch_, steps_per_epoch_,
                        loss / examples, static_cast<double>(correct) / examples,
                        examples / std::max(elapsed, 1e-9));
    }
    if (!o_.checkpoint_dir.empty() && o_.checkpoint_every_steps > 0 &&
        step % o_.checkpoint_every_steps == 0) {
      if (absl::Status s = Checkpoint(step); !s.ok()) return s;
    }
    if (step % steps_per_epoch_ == 0) {
      auto val = Evaluate(data_.validation);
      if (!val.ok()) return val.status();
      const double epoch_s = absl::ToDoubleSeconds(absl::Now() - epoch_start);
      job::EpochRecord record{step / steps_per_epoch_,
                              examples ? loss / examples : 0,
                              examples ? static_cast<double>(correct) / examples : 0,
                              val->loss,
                              val->accuracy,
                              epoch_s};
      if (o_.progress != nullptr) {
        o_.progress->EpochEnd(record, job_.epochs(), steps_per_epoch_,
                              examples / std::max(epoch_s, 1e-9));
      }
      result.epochs.push_back(record);
      if (events != nullptr) {
        const Aggregate a = Collect(servers_);
        int64_t applied = 0;
        for (int64_t c : a.histogram) applied += c;
        const std::pair<const char*, double> scalars[] = {
            {"loss", record.loss},
            {"accuracy", record.accuracy},
            {"val_loss", record.val_loss},
            {"val_accuracy", record.val_accuracy},
            {"examples_per_sec", examples / std::max(epoch_s, 1e-9)},
            {"staleness_mean", applied ? a.staleness_sum / applied : 0.0},
        };
        for (const auto& [tag, value] : scalars) {
          if (absl::Status st = events->AddScalar(tag, step, static_cast<float>(value)); !st.ok()) {
            return st;
          }
        }
        if (absl::Status st = events->Flush(); !st.ok()) return st;
      }
      loss = 0;
      correct = examples = 0;
      epoch_start = absl::Now();
    }
    if (o_.stop_after_unit && o_.stop_after_unit(step)) {
      return absl::CancelledError(absl::StrCat("stopped after step ", step));
    }
  }
  // Close any half-filled step and checkpoint the end.
  for (int s = 0; s < servers_->num_shards(); ++s) {
    proto::UpdateMembershipRequest close;
    close.set_partial(proto::UpdateMembershipRequest::DISCARD);
    proto::UpdateMembershipResponse closed;
    if (absl::Status st = servers_->UpdateMembership(s, close, &closed); !st.ok()) return st;
  }
  if (!o_.checkpoint_dir.empty() &&
      (o_.checkpoint_every_steps == 0 || total % o_.checkpoint_every_steps != 0)) {
    if (absl::Status s = Checkpoint(total); !s.ok()) return s;
  }
  auto params = PullAll();
  if (!params.ok()) return params.status();
  if (absl::Status s = executor_->SetParameters(*params); !s.ok()) return s;
  auto test = job::EvaluateSplit(executor_.get(), data_.test);
  if (!test.ok()) return test.status();
  result.test_loss = test->loss;
  result.test_accuracy = test->accuracy;
  if (events != nullptr) {
    if (absl::Status st = events->AddScalar("test_accuracy", total, test->accuracy); !st.ok())
      return st;
    if (absl::Status st = events->AddScalar("test_loss", total, test->loss); !st.ok()) return st;
    if (absl::Status st = events->Close(); !st.ok()) return st;
  }
  std::vector<std::pair<std::string, absl::Span<const float>>> named;
  for (size_t v = 0; v < params->size(); ++v) {
    named.emplace_back(model_->variables()[v].name, (*params)[v]);
  }
  result.final_variables_sha256 = job::VariablesSha256(named);
  const Aggregate a = Collect(servers_);
  result.gradients_accepted = a.accepted;
  result.gradients_applied = a.applied;
  result.gradients_dropped_stale = a.stale;
  result.gradients_discarded = a.discarded;
  int64_t count = 0;
  for (int64_t c : a.histogram) count += c;
  result.staleness_mean = count ? a.staleness_sum / count : 0;
  result.staleness_max = a.staleness_max;
  int64_t seen = 0;
  for (size_t i = 0; i < a.histogram.size(); ++i) {
    seen += a.histogram[i];
    if (count > 0 && seen * 100 >= count * 99) {
      result.staleness_p99 = static_cast<double>(i);
      break;
    }
  }
  result.steps = trained_steps;
  result.checkpoints_written = checkpoints_written_;
  result.workers_lost = workers_lost;
  result.worker_compute_s = compute_s;
  result.worker_comm_s = comm_s;
  result.recoveries = recoveries;
  result.wall_s = absl::ToDoubleSeconds(absl::Now() - start);
  result.examples_per_sec =
      train_seconds > 0 ? static_cast<double>(trained_steps * job_.batch_size()) / train_seconds
                        : 0;
  result.threads = job_.intra_op_threads();
  result.optimizer =
      absl::AsciiStrToLower(proto::OptimizerConfig::Kind_Name(job_.optimizer().kind()));
  return result;
}

}  // namespace

absl::StatusOr<job::JobResult> RunJob(const JobRunnerOptions& options,
                                      ps_client::ParameterClient* servers, WorkerClient* workers) {
  Runner runner(options, servers, workers);
  return runner.Run();
}

}  // namespace chief
}  // namespace psc
