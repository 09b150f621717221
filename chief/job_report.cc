#include "chief/job_report.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "absl/strings/ascii.h"
#include "common/base/logging.h"
#include "common/base/status_macros.h"
#include "common/job/job_flags.h"
#include "common/job/job_model.h"
#include "common/job/step_batch.h"

namespace psc {
namespace chief {
namespace {

// The servers' counters. Every push goes to every shard: gradients count
// once (shard 0's view), staleness over all shards' applies.
struct Counters {
  int64_t accepted = 0, applied = 0, stale = 0, discarded = 0, staleness_max = 0;
  double loss_scale = 0;  // shard 0's; 0 without loss scaling
  int64_t steps_skipped_overflow = 0, gradients_skipped_overflow = 0;
  std::vector<double> shard_scales;
  std::vector<int64_t> shard_steps_skipped;
  double staleness_sum = 0;
  std::vector<int64_t> histogram;

  int64_t staleness_count() const {
    int64_t n = 0;
    for (int64_t c : histogram) n += c;
    return n;
  }
};

Counters Collect(ps_client::ParameterClient* servers) {
  Counters a;
  for (int s = 0; s < servers->num_shards(); ++s) {
    auto stats = servers->GetStats(s);
    if (!stats.ok()) {
      // Unknown (written null and -1): the others keep their places.
      a.shard_scales.push_back(std::numeric_limits<double>::quiet_NaN());
      a.shard_steps_skipped.push_back(-1);
      if (s == 0) a.loss_scale = std::numeric_limits<double>::quiet_NaN();
      continue;
    }
    if (s == 0) {
      a.accepted = stats->pushes_accepted();
      a.applied = stats->gradients_applied();
      a.stale = stats->gradients_dropped_stale();
      a.discarded = stats->gradients_discarded();
      a.loss_scale = stats->loss_scale();
      a.steps_skipped_overflow = stats->steps_skipped_overflow();
      a.gradients_skipped_overflow = stats->gradients_skipped_overflow();
    }
    a.shard_scales.push_back(stats->loss_scale());
    a.shard_steps_skipped.push_back(stats->steps_skipped_overflow());
    a.staleness_max = std::max(a.staleness_max, stats->staleness_max());
    a.staleness_sum += stats->staleness_sum();
    a.histogram.resize(std::max<size_t>(a.histogram.size(), stats->staleness_histogram_size()), 0);
    for (int i = 0; i < stats->staleness_histogram_size(); ++i) {
      a.histogram[i] += stats->staleness_histogram(i);
    }
  }
  return a;
}

}  // namespace

JobReport::JobReport(const JobReportOptions& options)
    : options_(options),
      loss_kind_(*options.job),
      train_metrics_(job::MetricsOf(*options.job)),
      start_(options.start),
      epoch_start_(options.clock->Now()),
      high_water_(options.first_step) {}

double JobReport::ExamplesPerSecond(absl::Duration over) const {
  return examples_ / std::max(absl::ToDoubleSeconds(over), 1e-9);
}

void JobReport::AddPiece(int worker, int64_t first_step, int64_t end, int slot, int num_slots,
                         int push_as) {
  units_.push_back({first_step, end, slot, num_slots, worker, push_as});
}

void JobReport::AddUnit(int worker, const proto::UnitMetrics& metrics) {
  if (worker >= 0) {
    while (workers_.size() <= static_cast<size_t>(worker)) {
      workers_.emplace_back();
      workers_.back().worker = static_cast<int>(workers_.size()) - 1;
    }
    job::WorkerRecord& w = workers_[worker];
    w.straggler_factor = std::max(w.straggler_factor, metrics.straggler_factor());
    w.steps += metrics.steps();
    w.compute_s += metrics.compute_seconds();
    // The step's time past its compute: the wait for the servers, or (in a
    // collective group, or with pushes in parts) for the communication the
    // backward pass did not hide.
    w.comm_s += Overlapped() ? metrics.comm_exposed_seconds() : metrics.comm_seconds();
    w.idle_s += metrics.idle_seconds();
    w.data_wait_s += metrics.data_wait_seconds();
    w.examples += metrics.examples();
    w.examples_dropped += metrics.examples_dropped();
    w.examples_skipped += metrics.examples_skipped();
  }
  for (const proto::SkippedRecords& s : metrics.records_skipped()) {
    records_skipped_[s.path()].insert(s.records().begin(), s.records().end());
  }
  examples_seen_ += metrics.examples() - metrics.examples_dropped();
  epoch_dropped_ += metrics.examples_dropped();
  epoch_skipped_ += metrics.examples_skipped();
  loss_ += metrics.loss_sum();
  correct_ += metrics.correct();
  if (metrics.has_metric_sums()) {
    // A worker of another job's metrics: logged, not added (the units'
    // losses still count).
    if (absl::Status s = train_metrics_.Add(metrics.metric_sums()); !s.ok()) {
      base::Logf("chief: a unit's metric sums are not this job's: %s", s.ToString());
    }
  }
  examples_ += metrics.examples();
  compute_s_ += metrics.compute_seconds();
  comm_s_ += metrics.comm_seconds();
  exposed_s_ += metrics.comm_exposed_seconds();
}

std::map<std::string, int64_t> JobReport::RecordsSkipped() const {
  std::map<std::string, int64_t> out;
  for (const auto& [path, records] : records_skipped_) {
    out[path] = static_cast<int64_t>(records.size());
  }
  return out;
}

void JobReport::UnitDone(int64_t step, int64_t steps, absl::Duration took) {
  train_s_ += absl::ToDoubleSeconds(took);
  trained_steps_ += steps;
  // Steps [step - steps, step): those below the furthest step reached were
  // trained before a recovery rewound the servers.
  const int64_t first = step - steps;
  redone_steps_ += std::max<int64_t>(0, std::min(step, high_water_) - first);
  high_water_ = std::max(high_water_, step);
  const int64_t per_epoch = options_.steps_per_epoch;
  const int64_t epoch = (step - 1) / per_epoch + 1;
  if (options_.gauges != nullptr) {
    const double per_sec = ExamplesPerSecond(options_.clock->Now() - epoch_start_);
    options_.gauges->Update([&](JobGauges::Snapshot* g) {
      g->step = step;
      g->epoch = epoch;
      if (examples_ > 0) {
        g->loss = loss_kind_.Shown(loss_ / examples_);
        g->accuracy = loss_kind_.Accuracy(correct_, examples_);
      }
      g->examples_per_second = per_sec;
    });
  }
  if (options_.progress == nullptr || examples_ == 0) return;
  options_.progress->Step(epoch, options_.job->epochs(), step - (epoch - 1) * per_epoch, per_epoch,
                          loss_kind_.Shown(loss_ / examples_),
                          loss_kind_.Accuracy(correct_, examples_),
                          ExamplesPerSecond(options_.clock->Now() - epoch_start_),
                          options_.clock->Now() - epoch_start_, train_metrics_.Values());
}

absl::Status JobReport::EndEpoch(int64_t step, const job::SplitMetrics& validation,
                                 ps_client::ParameterClient* servers) {
  const absl::Duration took = options_.clock->Now() - epoch_start_;
  const double examples_per_sec = ExamplesPerSecond(took);
  job::EpochRecord record{
      step / options_.steps_per_epoch,
      examples_ ? loss_kind_.Shown(loss_ / examples_) : 0,
      loss_kind_.Accuracy(correct_, examples_),
      validation.loss,
      validation.accuracy,
      absl::ToDoubleSeconds(took),
      learning_rate_ > 0 ? learning_rate_ : options_.job->optimizer().learning_rate()};
  record.metrics = train_metrics_.Values();
  record.val_metrics = validation.metrics;
  // This chief's steps of the epoch (it may have resumed inside it).
  const int64_t epoch_first = std::max(step - options_.steps_per_epoch, options_.first_step);
  record.examples_expected = (step - epoch_first) * job::ExamplesReadPerStep(*options_.job);
  record.examples_trained = examples_ - epoch_dropped_;
  record.examples_dropped = epoch_dropped_;
  record.examples_skipped = epoch_skipped_;
  record.examples_lost = epoch_lost_;
  if (options_.progress != nullptr) {
    options_.progress->EpochEnd(record, options_.job->epochs(), options_.steps_per_epoch,
                                examples_per_sec, workers_note_);
  }
  epochs_.push_back(record);
  if (options_.train_events != nullptr) {
    const Counters c = Collect(servers);
    const int64_t applied = c.staleness_count();
    const int64_t epoch = record.epoch - 1;  // Keras's 0-based epoch index
    const std::pair<const char*, double> train[] = {
        {"epoch_loss", record.loss},
        {"epoch_accuracy", record.accuracy},
        {"epoch_examples_per_sec", examples_per_sec},
        {"epoch_staleness_mean", applied ? c.staleness_sum / applied : 0.0},
    };
    for (const auto& [tag, value] : train) {
      if (std::isnan(value)) continue;  // a regression's accuracy
      PSC_RETURN_IF_ERROR(options_.train_events->AddScalar(tag, epoch, static_cast<float>(value)));
    }
    // Keras's TensorBoard callback: epoch_<metric> in the train and
    // validation runs.
    for (const auto& [name, value] : record.metrics) {
      PSC_RETURN_IF_ERROR(
          options_.train_events->AddScalar("epoch_" + name, epoch, static_cast<float>(value)));
    }
    for (const auto& [name, value] : record.val_metrics) {
      PSC_RETURN_IF_ERROR(
          options_.validation_events->AddScalar("epoch_" + name, epoch, static_cast<float>(value)));
    }
    PSC_RETURN_IF_ERROR(options_.train_events->Flush());
    PSC_RETURN_IF_ERROR(options_.validation_events->AddScalar("epoch_loss", epoch,
                                                              static_cast<float>(record.val_loss)));
    if (!std::isnan(record.val_accuracy)) {
      PSC_RETURN_IF_ERROR(options_.validation_events->AddScalar(
          "epoch_accuracy", epoch, static_cast<float>(record.val_accuracy)));
    }
    PSC_RETURN_IF_ERROR(options_.validation_events->Flush());
  }
  loss_ = 0;
  correct_ = examples_ = 0;
  epoch_dropped_ = epoch_skipped_ = epoch_lost_ = 0;
  train_metrics_.Clear();
  epoch_start_ = options_.clock->Now();
  return absl::OkStatus();
}

absl::Status JobReport::AddEvaluation(int64_t step, const job::SplitMetrics& validation) {
  evaluations_.push_back({step, train_s_, examples_seen_, validation.loss, validation.accuracy});
  if (options_.gauges != nullptr) {
    options_.gauges->Update([&](JobGauges::Snapshot* g) {
      g->evaluated = true;
      g->val_loss = validation.loss;
      g->val_accuracy = validation.accuracy;
    });
  }
  if (options_.validation_events == nullptr) return absl::OkStatus();
  PSC_RETURN_IF_ERROR(options_.validation_events->AddScalar("evaluation_loss_vs_iterations", step,
                                                            static_cast<float>(validation.loss)));
  if (!std::isnan(validation.accuracy)) {
    PSC_RETURN_IF_ERROR(options_.validation_events->AddScalar(
        "evaluation_accuracy_vs_iterations", step, static_cast<float>(validation.accuracy)));
  }
  return options_.validation_events->Flush();
}

absl::StatusOr<job::JobResult> JobReport::Finish(const Final& final,
                                                 ps_client::ParameterClient* servers) {
  const proto::JobSpec& spec = *options_.job;
  if (options_.train_events != nullptr) {
    if (final.test.examples > 0) {
      const int64_t epoch = std::max<int64_t>(0, spec.epochs() - 1);
      PSC_RETURN_IF_ERROR(options_.test_events->AddScalar("epoch_loss", epoch, final.test.loss));
      if (!std::isnan(final.test.accuracy)) {
        PSC_RETURN_IF_ERROR(
            options_.test_events->AddScalar("epoch_accuracy", epoch, final.test.accuracy));
      }
      for (const auto& [name, value] : final.test.metrics) {
        PSC_RETURN_IF_ERROR(
            options_.test_events->AddScalar("epoch_" + name, epoch, static_cast<float>(value)));
      }
    }
    PSC_RETURN_IF_ERROR(options_.train_events->Close());
    PSC_RETURN_IF_ERROR(options_.validation_events->Close());
    PSC_RETURN_IF_ERROR(options_.test_events->Close());
  }
  job::JobResult r;
  r.mode = job::ModeName(spec.policy().mode());
  r.model = spec.model();
  if (absl::StatusOr<compute::Model> model = job::ModelForJob(spec); model.ok()) {
    r.compute_dtypes = model->ComputeDtypesText();
  }
  r.num_ps = options_.num_ps;
  r.num_workers = options_.num_workers;
  r.batch_size = spec.batch_size();
  r.epochs = epochs_;
  r.test_loss = final.test.loss;
  r.test_accuracy = final.test.accuracy;
  r.test_metrics = final.test.metrics;
  r.final_variables_sha256 = final.variables_sha256;
  r.stop = final.stop;
  const Counters c = Collect(servers);
  r.gradients_accepted = c.accepted;
  r.gradients_applied = c.applied;
  r.gradients_dropped_stale = c.stale;
  r.gradients_discarded = c.discarded;
  if (spec.policy().has_loss_scale()) {
    job::JobResult::LossScaleRecord ls;
    ls.initial = spec.policy().loss_scale().initial_scale();
    ls.growth_steps = spec.policy().loss_scale().growth_steps();
    ls.final_scale = c.loss_scale;
    ls.steps_skipped = c.steps_skipped_overflow;
    ls.gradients_skipped = c.gradients_skipped_overflow;
    ls.shard_scales = c.shard_scales;
    ls.shard_steps_skipped = c.shard_steps_skipped;
    r.loss_scale = ls;
  }
  const int64_t count = c.staleness_count();
  r.staleness_mean = count ? c.staleness_sum / count : 0;
  r.staleness_max = c.staleness_max;
  r.staleness_histogram = c.histogram;
  while (!r.staleness_histogram.empty() && r.staleness_histogram.back() == 0) {
    r.staleness_histogram.pop_back();
  }
  r.staleness_bound = spec.policy().mode() == proto::MODE_SSP ? spec.policy().staleness() : 0;
  r.replicas_to_aggregate =
      spec.policy().mode() == proto::MODE_SYNC ? job::ReplicasToAggregate(spec) : 0;
  r.train_s = train_s_;
  r.examples_seen = examples_seen_;
  r.evaluations = evaluations_;
  r.workers = workers_;
  int64_t seen = 0;
  for (size_t i = 0; i < c.histogram.size(); ++i) {
    seen += c.histogram[i];
    if (count > 0 && seen * 100 >= count * 99) {
      r.staleness_p99 = static_cast<double>(i);
      break;
    }
  }
  r.steps = high_water_;
  r.steps_redone = redone_steps_;
  r.checkpoints_written = final.checkpoints_written;
  r.workers_lost = final.workers_lost;
  r.worker_compute_s = compute_s_;
  r.worker_comm_s = comm_s_;
  r.recoveries = final.recoveries;
  r.workers_joined = final.workers_joined;
  r.workers_rejoined = final.workers_rejoined;
  r.workers_drained = final.workers_drained;
  r.membership = final.membership;
  r.units = units_;
  r.regroups = final.regroups;
  r.strategy = job::StrategyName(spec.strategy());
  if (Overlapped()) {
    r.comm_s = comm_s_;
    r.comm_hidden_fraction = comm_s_ > 0 ? std::clamp(1.0 - exposed_s_ / comm_s_, 0.0, 1.0) : 0;
  }
  r.wall_s = absl::ToDoubleSeconds(options_.clock->Now() - start_);
  r.examples_per_sec =
      train_s_ > 0 ? static_cast<double>(trained_steps_ * spec.batch_size()) / train_s_ : 0;
  r.threads = spec.intra_op_threads();
  r.optimizer = absl::AsciiStrToLower(proto::OptimizerConfig::Kind_Name(spec.optimizer().kind()));
  return r;
}

}  // namespace chief
}  // namespace psc
