// evaluator: the optional "evaluator" task of TF_CONFIG. It evaluates the
// checkpoints the parameter servers write on the side, as TensorFlow's
// evaluator does (evaluator/evaluation_loop.h): the newest complete one
// not evaluated yet, on the validation split, until the checkpoint of the
// job's final step. It reads files and serves nothing but --metrics_port;
// with a TF_CONFIG it announces itself to the chief (its Coordinator) once
// it is ready and tells it each step it evaluated, so that the chief waits
// for the final one before it exits, whether its TF_CONFIG lists the
// evaluator or not.
// Of the daemon flags it uses --tf_config, --dry_run, --metrics_port and
// the token and TLS flags (to reach the chief).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/base/logging.h"
#include "common/base/shutdown.h"
#include "common/cluster/cluster_config.h"
#include "common/compute/model.h"
#include "common/daemon/daemon.h"
#include "common/daemon/daemon_flags.h"
#include "common/daemon/daemon_metrics.h"
#include "common/data/dataset.h"
#include "common/job/job_data.h"
#include "common/job/job_flags.h"
#include "common/job/job_model.h"
#include "common/metrics/families.h"
#include "common/rpc/security.h"
#include "evaluator/checkpoint_evaluator.h"
#include "evaluator/chief_reporter.h"
#include "evaluator/evaluation_loop.h"

ABSL_FLAG(std::string, checkpoint_dir, "",
          "Evaluate the checkpoints written here (the chief's --checkpoint_dir). Required.");
ABSL_FLAG(std::string, logdir, "",
          "Write TensorBoard event files (evaluation/loss, evaluation/accuracy per checkpoint "
          "step) to <logdir>/eval.");
ABSL_FLAG(absl::Duration, poll_interval, absl::Seconds(2),
          "How often to look for a new complete checkpoint, e.g. 500ms or 2s.");
ABSL_FLAG(std::string, eval_out, "",
          "Append one JSON line per evaluation here: "
          "{\"step\":..,\"loss\":..,\"accuracy\":..,\"examples\":..}.");

namespace {

constexpr char kProgram[] = "evaluator";

// TF_CONFIG is optional; when it is given (flag or environment), this task
// must be the cluster's evaluator.
bool HasTfConfig() {
  const char* env = std::getenv("TF_CONFIG");
  return !absl::GetFlag(FLAGS_tf_config).empty() || (env != nullptr && env[0] != '\0');
}

absl::Status ValidateFlags() {
  if (absl::GetFlag(FLAGS_checkpoint_dir).empty()) {
    return absl::InvalidArgumentError(
        "--checkpoint_dir is required: the directory the chief checkpoints to");
  }
  const absl::Duration poll = absl::GetFlag(FLAGS_poll_interval);
  if (poll <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--poll_interval=", absl::FormatDuration(poll), ": must be > 0"));
  }
  return absl::OkStatus();
}

// What the evaluator's metrics report.
struct EvaluatorGauges {
  std::mutex mu;
  int64_t evaluations = 0;
  int64_t last_step = -1;
  double loss = 0, accuracy = 0;

  std::vector<prometheus::MetricFamily> Families() {
    std::lock_guard<std::mutex> lock(mu);
    std::vector<prometheus::MetricFamily> out = {
        psc::metrics::Counter("pscluster_evaluator_evaluations_total", "Checkpoints evaluated.",
                              evaluations),
        psc::metrics::Gauge("pscluster_evaluator_last_step",
                            "Step of the last checkpoint evaluated; -1: none yet.", last_step)};
    if (last_step >= 0) {
      out.push_back(psc::metrics::Gauge("pscluster_evaluator_loss",
                                        "Validation loss of the last checkpoint evaluated.", loss));
      out.push_back(psc::metrics::Gauge("pscluster_evaluator_accuracy",
                                        "Validation accuracy of the last checkpoint evaluated.",
                                        accuracy));
    }
    return out;
  }
};

}  // namespace

int main(int argc, char** argv) {
  psc::daemon::InitDaemon(
      "evaluates a pscluster job's checkpoints on the side (the \"evaluator\" task of "
      "TF_CONFIG).\n"
      "Usage: [TF_CONFIG='{...}'] evaluator --checkpoint_dir=DIR [--logdir=DIR] [--eval_out=F] "
      "[job flags]",
      argc, argv);
  std::string task;  // "evaluator:0 " with a TF_CONFIG
  std::unique_ptr<psc::evaluator::ChiefReporter> reporter;
  std::string listen_host = "127.0.0.1";  // --metrics_port's host
  if (HasTfConfig() || absl::GetFlag(FLAGS_dry_run)) {
    auto cluster =
        psc::daemon::LoadClusterConfigFromFlags(kProgram, {psc::cluster::TaskType::kEvaluator});
    if (!cluster.ok()) return psc::daemon::ReportFailure(kProgram, cluster.status());
    if (absl::GetFlag(FLAGS_dry_run)) {
      std::printf("%s\n", cluster->DryRunJson().c_str());
      return 0;
    }
    task = cluster->self().Name() + " ";
    auto security = psc::rpc::LoadSecurityOptions(
        absl::GetFlag(FLAGS_auth_token_file), absl::GetFlag(FLAGS_tls_cert),
        absl::GetFlag(FLAGS_tls_key), absl::GetFlag(FLAGS_tls_ca));
    if (!security.ok()) return psc::daemon::ReportFailure(kProgram, security.status());
    // The coordinator: the chief task, or worker 0 of a cluster without one.
    const auto& chiefs = cluster->tasks(psc::cluster::TaskType::kChief);
    const auto& workers = cluster->tasks(psc::cluster::TaskType::kWorker);
    if (!chiefs.empty() || !workers.empty()) {
      reporter = std::make_unique<psc::evaluator::ChiefReporter>(
          (!chiefs.empty() ? chiefs[0] : workers[0]).address.ToString(), *security,
          cluster->task_index());
    }
    // Outside the cluster it has no address of its own (--bind gives one).
    if (!cluster->self().address.host.empty()) listen_host = cluster->self().address.host;
    if (const std::string bind = absl::GetFlag(FLAGS_bind); !bind.empty()) {
      auto host_port = psc::cluster::ParseHostPort(bind);  // "host:port" or a host
      listen_host = host_port.ok() ? host_port->host : bind;
    }
  }
  // Flags and the job are validated before anything is read (exit 2).
  if (absl::Status s = ValidateFlags(); !s.ok()) return psc::daemon::ReportFailure(kProgram, s);
  auto job = psc::job::JobSpecFromFlags();  // --metrics_out is the chief's: not used here
  if (!job.ok()) return psc::daemon::ReportFailure(kProgram, job.status());

  auto model = psc::job::ModelForJob(*job);
  if (!model.ok()) return psc::daemon::ReportFailure(kProgram, model.status());
  auto job_data = psc::job::LoadJobData(*job, *model);
  if (!job_data.ok()) return psc::daemon::ReportFailure(kProgram, job_data.status());
  psc::data::FashionMnist* data = &job_data->splits;
  auto final_step = psc::evaluator::FinalStep(*job, data->train.count);
  if (!final_step.ok()) return psc::daemon::ReportFailure(kProgram, final_step.status());
  // The job's threads and --conv_algorithm, as its workers run the model.
  auto evaluator = psc::evaluator::CheckpointEvaluator::Create(
      *model, &data->validation, psc::job::CpuOptionsForJob(*job, job->intra_op_threads()));
  if (!evaluator.ok()) return psc::daemon::ReportFailure(kProgram, evaluator.status());
  (*evaluator)->set_job(*job);
  // Ready to evaluate: the chief may now wait for this evaluator.
  std::optional<psc::evaluator::ChiefAnnouncer> announcer;
  if (reporter) announcer.emplace(reporter.get(), kProgram);

  psc::evaluator::EvaluationLoopOptions options;
  options.checkpoint_dir = absl::GetFlag(FLAGS_checkpoint_dir);
  options.final_step = *final_step;
  options.poll_interval = absl::GetFlag(FLAGS_poll_interval);
  options.logdir = absl::GetFlag(FLAGS_logdir);
  options.eval_out = absl::GetFlag(FLAGS_eval_out);
  psc::base::ShutdownSignal shutdown;
  options.shutdown = &shutdown;
  EvaluatorGauges gauges;
  auto metrics = psc::daemon::StartMetricsFromFlags(kProgram, listen_host, "evaluator",
                                                    [&gauges] { return gauges.Families(); });
  if (!metrics.ok()) return psc::daemon::ReportFailure(kProgram, metrics.status());
  psc::base::Logf("%s: %swatching %s every %s until step %d (%s, %d validation examples)", kProgram,
                  task, options.checkpoint_dir, absl::FormatDuration(options.poll_interval),
                  options.final_step, job->model(), data->validation.count);

  // The loop runs here while a watcher thread takes SIGTERM/SIGINT.
  std::thread watcher([&shutdown] { shutdown.Wait(); });
  auto summary = psc::evaluator::RunEvaluationLoop(
      options, [&](const psc::checkpoint::CompleteCheckpoint& checkpoint) {
        auto result = (*evaluator)->Evaluate(options.checkpoint_dir, checkpoint);
        if (!result.ok()) return result;
        {
          std::lock_guard<std::mutex> lock(gauges.mu);
          ++gauges.evaluations;
          gauges.last_step = checkpoint.step;
          gauges.loss = result->loss;
          gauges.accuracy = result->accuracy;
        }
        if (reporter) {
          // The final step is worth waiting for: the chief waits for it.
          const bool final = checkpoint.step >= options.final_step;
          absl::Status s = reporter->Report(checkpoint.step, *result,
                                            final ? absl::Minutes(1) : absl::Seconds(2));
          if (!s.ok()) {
            psc::base::Logf("%s: could not tell the chief: %s", kProgram, std::string(s.message()));
          }
        }
        return result;
      });
  shutdown.Request("evaluation finished");
  watcher.join();
  if (!summary.ok()) return psc::daemon::ReportFailure(kProgram, summary.status());
  if (summary->finished) {
    psc::base::Logf("%s: evaluated the final checkpoint (step %d): %d evaluation(s), %d skipped",
                    kProgram, options.final_step, summary->evaluations.size(),
                    summary->skipped.size() + summary->given_up.size());
  } else {
    psc::base::Logf("%s: %s: stopped before the final step (%d evaluation(s))", kProgram,
                    summary->stop_reason, summary->evaluations.size());
  }
  return 0;
}
