#include "worker/standalone_trainer.h"

#include <algorithm>
#include <cstdio>
#include <memory>
#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"
#include "common/compute/cpu_backend.h"
#include "common/compute/model.h"
#include "common/data/batch_plan.h"
#include "common/data/dataset.h"
#include "common/data/prefetcher.h"
#include "common/job/compiled_metrics.h"
#include "common/job/epoch_callbacks.h"
#include "common/job/evaluation.h"
#include "common/job/job_data.h"
#include "common/job/job_flags.h"
#include "common/job/job_loss.h"
#include "common/job/job_model.h"
#include "common/job/record_stream.h"
#include "common/optimizer/loss_scale.h"
#include "common/optimizer/optimizer.h"
#include "worker/divergence.h"
#include "worker/replica_backends.h"

namespace psc {
namespace worker {

absl::StatusOr<job::JobResult> TrainStandalone(const proto::JobSpec& job,
                                               job::ProgressPrinter* progress,
                                               std::vector<std::vector<float>>* final_params,
                                               const DeviceSetup& devices, base::Clock* clock) {
  base::RealClock real_clock;
  if (clock == nullptr) clock = &real_clock;
  const absl::Time start = clock->Now();
  PSC_ASSIGN_OR_RETURN(auto model, job::ModelForJob(job));
  PSC_ASSIGN_OR_RETURN(job::JobData job_data, job::LoadJobData(job, model));
  const data::FashionMnist* dataset = &job_data.splits;
  data::BatchPlanOptions plan_options;
  plan_options.num_examples = dataset->train.count;
  plan_options.batch_size = job.batch_size();
  plan_options.seed = job.seed();
  plan_options.steps_per_epoch = job.steps_per_epoch();
  if (job.no_shuffle()) plan_options.shuffle_buffer = 1;  // fit(shuffle=False): in order
  PSC_ASSIGN_OR_RETURN(auto plan, data::BatchPlan::Create(plan_options));
  // Streamed data files: one slot reads them all (null: none).
  PSC_ASSIGN_OR_RETURN(std::unique_ptr<job::SlotBatches> stream,
                       job::SlotBatches::ForJob(job, model, job_data, job.batch_size()));
  const int64_t local = std::max<int64_t>(1, static_cast<int64_t>(devices.plan.devices.size()));
  PSC_ASSIGN_OR_RETURN(auto replicas, CreateReplicas(devices, &model, job.intra_op_threads(),
                                                     (job.batch_size() + local - 1) / local,
                                                     job::CpuOptionsForJob(job, 0).conv));
  MirroredReplicas* mirrored = replicas.get();
  PSC_RETURN_IF_ERROR(mirrored->Prepare(job.batch_size()));
  PSC_ASSIGN_OR_RETURN(auto optimizer_config, optimizer::CompleteOptimizerConfig(job.optimizer()));
  // A unique_ptr: ReduceLROnPlateau replaces it with another rate.
  auto optimizer = std::make_unique<optimizer::Optimizer>(optimizer_config);

  PSC_ASSIGN_OR_RETURN(std::vector<std::vector<float>> params, job::InitialParameters(job, model));
  std::vector<std::vector<std::vector<float>>> slots(params.size());
  for (size_t v = 0; v < params.size(); ++v) {
    for (float initial : optimizer->slot_initial_values()) {
      slots[v].emplace_back(params[v].size(), initial);
    }
  }
  std::vector<std::vector<float>> grads;
  const std::vector<std::optional<float>>& moving_averages = model.moving_averages();
  for (size_t v = 0; v < moving_averages.size() && v < params.size(); ++v) {
    if (moving_averages[v].has_value()) {
      PSC_RETURN_IF_ERROR(
          optimizer::CheckMovingAverageMomentum(*moving_averages[v], model.variables()[v].name));
    }
  }

  job::JobResult result;
  job::SetJob(job, start, &result);
  result.mode = "standalone";
  result.strategy = job::StrategyName(job.strategy());
  result.model = job.model();
  result.compute_dtypes = model.ComputeDtypesText();
  result.optimizer =
      absl::AsciiStrToLower(proto::OptimizerConfig::Kind_Name(job.optimizer().kind()));
  result.num_ps = 0;
  result.num_workers = 1;
  result.batch_size = job.batch_size();
  result.data = job_data.record;
  result.threads = compute::CpuBackendThreads();
  const int64_t steps_per_epoch = plan.steps_per_epoch();
  // The batch's mean, or under reduction="sum" its sum.
  const job::JobLoss loss_kind(job);
  const float mean_scale = 1.0f / static_cast<float>(job.batch_size());
  double train_seconds = 0;
  int64_t step = 0;
  // Keras's LossScaleOptimizer: a step that overflows is skipped, and
  // the optimizer's iterations count the applied updates only.
  std::optional<optimizer::LossScale> loss_scale;
  if (job.policy().has_loss_scale()) loss_scale.emplace(job.policy().loss_scale());
  int64_t updates = 0;
  job::EpochCallbacks callbacks(job.callbacks(), job::MetricsOf(job),
                                !job::IsRegressionLoss(job.loss()));  // EarlyStopping
  std::vector<std::vector<float>> best;
  for (int64_t epoch = 1; epoch <= job.epochs(); ++epoch) {
    const absl::Time epoch_start = clock->Now();
    std::optional<data::Prefetcher> prefetcher;
    if (stream != nullptr) {
      prefetcher.emplace(
          [&stream](int64_t s, const std::atomic<bool>& stop) {
            return stream->Batch(s, 0, 1, &stop);
          },
          step, steps_per_epoch, 2);
    } else {
      prefetcher.emplace(&dataset->train, &plan, step, steps_per_epoch, 0, 1, 2);
    }
    double loss = 0;
    int64_t correct = 0, examples = 0;
    job::MetricSums metric_sums(job::MetricsOf(job));
    std::vector<float> outputs;
    for (int64_t i = 0; i < steps_per_epoch; ++i, ++step) {
      PSC_ASSIGN_OR_RETURN(auto batch, prefetcher->Next());
      PSC_RETURN_IF_ERROR(mirrored->SetParameters(params));
      compute::StepResult r;
      mirrored->SetDropoutKey(job.seed(), step, 0);
      compute::LossOptions step_loss =
          loss_kind.Step(mean_scale, 1.0f, batch.weights, batch.targets);
      if (loss_scale) step_loss.grad_scale *= loss_scale->scale();
      PSC_RETURN_IF_ERROR(mirrored->ComputeGradients(batch.images, batch.labels, step_loss, &r));
      PSC_RETURN_IF_ERROR(mirrored->CopyGradients(&grads));
      bool overflow = false;
      if (loss_scale) {
        overflow =
            !optimizer::UnscaleGradients(loss_scale->scale(), model.trainable_variables(), &grads);
        if (overflow && loss_scale->scale() <= optimizer::kMinLossScale) {
          return DivergedError(0, step, OverflowAtTheSmallestScale(),
                               job.optimizer().learning_rate(), absl::OkStatus());
        }
        loss_scale->Update(!overflow);
      }
      if (!metric_sums.empty()) {
        PSC_RETURN_IF_ERROR(mirrored->CopyOutputs(&outputs));
        metric_sums.Add(outputs, batch.labels, model.classes(), batch.targets);
      }
      // Under loss scaling an overflowed gradient is a skipped step; only
      // the loss can diverge.
      if (const std::string report = loss_scale
                                         ? NonFiniteReport(r.loss_sum, {}, {})
                                         : NonFiniteReport(r.loss_sum, grads, model.variables());
          !report.empty()) {
        return DivergedError(0, step, report, job.optimizer().learning_rate(), absl::OkStatus());
      }
      if (!overflow) {
        if (job.optimizer().global_clipnorm() > 0) {
          optimizer::ClipByGlobalNorm(job.optimizer().global_clipnorm(),
                                      model.trainable_variables(), &grads);
        }
        for (size_t v = 0; v < params.size(); ++v) {
          // A moving average's "gradient" is its batch statistic: Keras's
          // momentum update, no optimizer (as a shard applies it).
          if (v < moving_averages.size() && moving_averages[v].has_value()) {
            optimizer::ApplyMovingAverage(params[v].data(), grads[v].data(), params[v].size(),
                                          *moving_averages[v]);
            continue;
          }
          std::vector<float*> slot_ptrs;
          for (auto& s : slots[v]) slot_ptrs.push_back(s.data());
          optimizer->Apply(params[v].data(), grads[v].data(), params[v].size(), slot_ptrs.data(),
                           updates);
        }
        ++updates;
      }
      loss += r.loss_sum;
      correct += r.correct;
      examples += r.examples;
      if (progress != nullptr) {
        const double elapsed = absl::ToDoubleSeconds(clock->Now() - epoch_start);
        progress->Step(epoch, job.epochs(), i + 1, steps_per_epoch,
                       loss_kind.Shown(loss / examples), loss_kind.Accuracy(correct, examples),
                       examples / std::max(elapsed, 1e-9), clock->Now() - epoch_start,
                       metric_sums.Values());
      }
    }
    const double epoch_train_s = absl::ToDoubleSeconds(clock->Now() - epoch_start);
    train_seconds += epoch_train_s;
    PSC_RETURN_IF_ERROR(mirrored->SetParameters(params));
    PSC_ASSIGN_OR_RETURN(auto val, job::EvaluateSplit(mirrored->primary(), dataset->validation,
                                                      loss_kind, job::MetricsOf(job)));
    job::EpochRecord record{epoch,
                            loss_kind.Shown(loss / examples),
                            loss_kind.Accuracy(correct, examples),
                            val.loss,
                            val.accuracy,
                            epoch_train_s};
    record.metrics = metric_sums.Values();
    record.val_metrics = val.metrics;
    if (progress != nullptr) {
      progress->EpochEnd(record, job.epochs(), steps_per_epoch, examples / epoch_train_s);
    }
    result.epochs.push_back(record);
    const job::EpochCallbacks::Verdict v =
        callbacks.OnEpochEnd(epoch - 1, job::LogsOf(record), optimizer->config().learning_rate());
    // Under a schedule, the rate of the epoch's last update.
    result.epochs.back().learning_rate =
        optimizer::LearningRateAt(optimizer->config(), std::max<int64_t>(updates - 1, 0));
    if (v.keep_weights) best = params;
    if (v.learning_rate.has_value()) {  // ReduceLROnPlateau: the same slots go on
      proto::OptimizerConfig reduced = optimizer->config();
      reduced.set_learning_rate(*v.learning_rate);
      std::printf("epoch %lld: learning rate %g -> %g (ReduceLROnPlateau)\n",
                  static_cast<long long>(epoch), optimizer->config().learning_rate(),
                  *v.learning_rate);
      optimizer = std::make_unique<optimizer::Optimizer>(reduced);
    }
    if (v.stop) {
      result.stop.stopped_epoch = epoch;
      result.stop.reason = v.why;
      std::printf("%s\n", v.why.c_str());
      break;
    }
  }
  if (callbacks.restore_best_weights() && !best.empty()) {
    params = std::move(best);
    result.stop.best_epoch = callbacks.best_epoch() + 1;
    result.stop.restored_best_weights = true;
  }
  PSC_RETURN_IF_ERROR(mirrored->SetParameters(params));
  PSC_ASSIGN_OR_RETURN(auto test, job::EvaluateSplit(mirrored->primary(), dataset->test, loss_kind,
                                                     job::MetricsOf(job)));
  LogConvAlgorithms(*mirrored);
  LogDeviceMemory(*mirrored);
  result.test_loss = test.loss;
  result.test_metrics = test.metrics;
  result.test_accuracy = test.accuracy;
  result.steps = step;
  result.gradients_accepted = step;
  result.gradients_applied = updates;
  if (loss_scale) {
    job::JobResult::LossScaleRecord ls;
    ls.initial = job.policy().loss_scale().initial_scale();
    ls.growth_steps = job.policy().loss_scale().growth_steps();
    ls.final_scale = loss_scale->scale();
    ls.steps_skipped = loss_scale->State().skipped_steps();
    ls.gradients_skipped = ls.steps_skipped;
    ls.shard_scales = {ls.final_scale};  // the one replica of the variables
    ls.shard_steps_skipped = {ls.steps_skipped};
    result.loss_scale = ls;
  }
  result.wall_s = absl::ToDoubleSeconds(clock->Now() - start);
  result.examples_per_sec = static_cast<double>(step * job.batch_size()) / train_seconds;
  std::vector<std::pair<std::string, absl::Span<const float>>> named;
  for (size_t v = 0; v < params.size(); ++v)
    named.emplace_back(model.variables()[v].name, params[v]);
  result.final_variables_sha256 = job::VariablesSha256(named);
  if (final_params != nullptr) *final_params = std::move(params);
  if (stream != nullptr) {
    for (const auto& [path, indices] : stream->skipped()) {
      result.data.records_skipped.emplace_back(path, static_cast<int64_t>(indices.size()));
    }
  }
  return result;
}

}  // namespace worker
}  // namespace psc
