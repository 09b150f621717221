// chief: coordinates the cluster. It waits for every ps and worker to
// answer, runs the training job (chief/job_runner.h), writes the result
// file, and shuts the cluster down. --check_cluster only checks and changes
// nothing.
#include <cstdio>
#include <thread>

#include "absl/flags/flag.h"
#include "chief/cluster_waiter.h"
#include "chief/coordinator_service.h"
#include "chief/grpc_task_prober.h"
#include "chief/grpc_worker_client.h"
#include "chief/job_runner.h"
#include "chief/task_registry.h"
#include "common/base/logging.h"
#include "common/daemon/daemon.h"
#include "common/daemon/daemon_flags.h"
#include "common/job/job_data.h"
#include "common/job/job_export.h"
#include "common/job/job_flags.h"
#include "common/job/job_result.h"
#include "common/job/progress.h"
#include "common/rpc/grpc_parameter_client.h"
#include "common/rpc/server.h"

ABSL_FLAG(bool, check_cluster, false,
          "Wait for every ps and worker task (up to --startup_timeout), print which answer, "
          "and exit: 0 if all do, 1 naming the missing ones. Starts no server; changes nothing.");
ABSL_FLAG(bool, check_job, false,
          "Check the job flags, the model and the data (every array's shape and every label), "
          "print what would train, and exit: 0, or 2 with the reason (0 with --check_cluster or "
          "--dry_run, which train nothing). Needs no TF_CONFIG; `pscluster launch` runs it "
          "before it starts any task.");
ABSL_FLAG(absl::Duration, startup_timeout, absl::Seconds(60),
          "How long to wait for the cluster's tasks to answer, e.g. 30s or 2m.");
ABSL_FLAG(std::string, checkpoint_dir, "",
          "Checkpoint the servers here, and resume from the latest checkpoint found here.");
ABSL_FLAG(int64_t, checkpoint_every_steps, 0,
          "Checkpoint every N global steps (and at the end); 0 = only at the end.");
ABSL_FLAG(int64_t, unit_steps, 20, "Steps per work unit handed to each worker.");
ABSL_FLAG(int32_t, eval_threads, 0, "CPU threads of the chief's evaluation; 0 = all cores.");
ABSL_FLAG(std::string, logdir, "", "Write TensorBoard event files (scalars per epoch) here.");
ABSL_FLAG(absl::Duration, heartbeat_timeout, absl::Seconds(30),
          "A worker that registered with this chief and sent no heartbeat for this long is lost "
          "(its unit is handed over, the servers stop waiting for it); 0 = only a failed unit "
          "of a worker that no longer answers is a loss.");

namespace {

constexpr char kProgram[] = "chief";

// Waits for the cluster on a helper thread while the main thread watches
// SIGTERM/SIGINT, which cancel the wait.
psc::chief::ClusterWaitResult WaitForClusterOrSignal(const psc::cluster::ClusterConfig& cluster,
                                                     const psc::rpc::SecurityOptions& security) {
  psc::base::ShutdownSignal done;
  psc::chief::GrpcTaskProber prober(security);
  psc::base::RealClock clock;
  psc::chief::ClusterWaitOptions options;
  options.timeout = absl::GetFlag(FLAGS_startup_timeout);
  options.cancelled = [&] { return done.requested(); };
  psc::chief::ClusterWaitResult result;
  std::thread waiter([&] {
    result =
        psc::chief::WaitForCluster(psc::chief::TasksToWaitFor(cluster), prober, clock, options);
    done.Request("cluster wait finished");
  });
  const std::string reason = done.Wait();
  waiter.join();
  if (result.cancelled) psc::base::Logf("%s: %s", kProgram, reason);
  return result;
}

}  // namespace

int main(int argc, char** argv) {
  psc::daemon::InitDaemon(
      "the pscluster coordinator (the \"chief\" task of TF_CONFIG).\n"
      "Usage: TF_CONFIG='{...}' chief [flags]   or   chief --tf_config=@file --check_cluster",
      argc, argv);
  const absl::Duration timeout = absl::GetFlag(FLAGS_startup_timeout);
  if (timeout < absl::ZeroDuration()) {
    return psc::daemon::ReportFailure(
        kProgram, absl::InvalidArgumentError("--startup_timeout must not be negative"));
  }
  // The job is validated before anything starts (exit 2 on a bad flag).
  absl::StatusOr<psc::proto::JobSpec> job = absl::UnknownError("unused");
  if (!absl::GetFlag(FLAGS_check_cluster) && !absl::GetFlag(FLAGS_dry_run)) {
    job = psc::job::JobSpecFromFlags();
    if (!job.ok()) return psc::daemon::ReportFailure(kProgram, job.status());
    if (absl::GetFlag(FLAGS_checkpoint_every_steps) < 0 || absl::GetFlag(FLAGS_unit_steps) < 1 ||
        absl::GetFlag(FLAGS_eval_threads) < 0) {
      return psc::daemon::ReportFailure(
          kProgram,
          absl::InvalidArgumentError("--checkpoint_every_steps must be >= 0, --unit_steps >= 1, "
                                     "--eval_threads >= 0"));
    }
    if (absl::Status s = psc::job::ExportOptionsFromFlags().status(); !s.ok()) {
      return psc::daemon::ReportFailure(kProgram, s);
    }
    if (absl::GetFlag(FLAGS_heartbeat_timeout) < absl::ZeroDuration()) {
      return psc::daemon::ReportFailure(
          kProgram, absl::InvalidArgumentError("--heartbeat_timeout must not be negative"));
    }
  }
  if (absl::GetFlag(FLAGS_check_job)) {
    if (!job.ok()) {  // --check_cluster or --dry_run: this chief will train nothing
      std::printf("no job to check (--check_cluster and --dry_run run none)\n");
      return 0;
    }
    absl::StatusOr<std::string> summary = psc::job::CheckJob(*job);
    if (!summary.ok()) return psc::daemon::ReportFailure(kProgram, summary.status());
    std::printf("%s\n", summary->c_str());
    return 0;
  }
  psc::daemon::DaemonStart start =
      psc::daemon::PrepareDaemon(kProgram, psc::cluster::TaskType::kChief);
  if (!start.context) return start.exit_code;
  const psc::daemon::DaemonContext& context = *start.context;

  if (absl::GetFlag(FLAGS_check_cluster)) {
    psc::chief::ClusterWaitResult result =
        WaitForClusterOrSignal(context.cluster, context.security);
    std::printf("%s", result.Table().c_str());
    std::fflush(stdout);
    absl::Status s = result.ToStatus(timeout);
    if (!s.ok()) return psc::daemon::ReportFailure(kProgram, s);
    std::printf("cluster ready: %zu tasks answer\n", result.tasks.size());
    return 0;
  }

  // Serve the Coordinator while finding the cluster.
  psc::base::RealClock clock;
  psc::chief::TaskRegistry registry(&context.cluster, &clock);
  psc::chief::CoordinatorService coordinator(&registry, context.security.token);
  auto server = psc::rpc::GrpcServer::Start({context.listen, context.security}, {&coordinator});
  if (!server.ok()) return psc::daemon::ReportFailure(kProgram, server.status());
  psc::base::Logf("%s: serving on %s; waiting up to %s for %d tasks", kProgram,
                  (*server)->address(), absl::FormatDuration(timeout),
                  psc::chief::TasksToWaitFor(context.cluster).size());
  psc::chief::ClusterWaitResult result = WaitForClusterOrSignal(context.cluster, context.security);
  std::printf("%s", result.Table().c_str());
  std::fflush(stdout);
  absl::Status s = result.ToStatus(timeout);
  if (!s.ok()) {
    (*server)->Shutdown(absl::GetFlag(FLAGS_shutdown_grace));
    return psc::daemon::ReportFailure(kProgram, s);
  }
  psc::base::Logf("%s: cluster ready: %d tasks answer in %s", kProgram, result.tasks.size(),
                  absl::FormatDuration(absl::Trunc(result.elapsed, absl::Milliseconds(1))));

  // The job, on a thread of its own while this thread watches the signals.
  std::vector<std::string> ps_addresses, worker_addresses;
  for (const auto& t : context.cluster.tasks(psc::cluster::TaskType::kPs))
    ps_addresses.push_back(t.address.ToString());
  for (const auto& t : context.cluster.tasks(psc::cluster::TaskType::kWorker)) {
    worker_addresses.push_back(t.address.ToString());
  }
  psc::rpc::GrpcParameterClient servers(ps_addresses, context.security, absl::Seconds(60),
                                        absl::GetFlag(FLAGS_data_channel));
  psc::chief::GrpcWorkerClient workers(worker_addresses, context.security);
  psc::job::ProgressPrinter progress(stdout);
  psc::base::ShutdownSignal interrupted;
  psc::chief::JobRunnerOptions options;
  options.job = *job;
  options.checkpoint_dir = absl::GetFlag(FLAGS_checkpoint_dir);
  options.checkpoint_every_steps = absl::GetFlag(FLAGS_checkpoint_every_steps);
  options.unit_steps = absl::GetFlag(FLAGS_unit_steps);
  options.eval_threads = absl::GetFlag(FLAGS_eval_threads);
  options.logdir = absl::GetFlag(FLAGS_logdir);
  options.exports = *psc::job::ExportOptionsFromFlags();  // checked above
  options.progress = &progress;
  options.registry = &registry;
  options.heartbeat_timeout = absl::GetFlag(FLAGS_heartbeat_timeout);
  options.stop_after_unit = [&interrupted](int64_t) { return interrupted.requested(); };
  absl::StatusOr<psc::job::JobResult> outcome = absl::UnknownError("not run");
  psc::base::ShutdownSignal finished;
  std::thread runner([&] {
    outcome = psc::chief::RunJob(options, &servers, &workers);
    finished.Request("job finished");
  });
  // Wait for the job or a signal; a signal stops the job at the next unit.
  std::thread watcher([&] {
    const std::string reason = interrupted.Wait();
    if (reason != "job finished")
      psc::base::Logf("%s: %s: stopping after the current unit", kProgram, reason);
  });
  finished.Wait();
  interrupted.Request("job finished");
  runner.join();
  watcher.join();
  (*server)->Shutdown(absl::GetFlag(FLAGS_shutdown_grace));
  if (!outcome.ok()) return psc::daemon::ReportFailure(kProgram, outcome.status());
  std::printf("%s\n", psc::job::FinalLine(*outcome).c_str());
  outcome->peak_rss_mb = psc::job::PeakRssMb();
  std::fflush(stdout);
  const std::string out = absl::GetFlag(FLAGS_metrics_out);
  if (!out.empty()) {
    if (absl::Status w = psc::job::WriteJobResult(out, *outcome); !w.ok()) {
      return psc::daemon::ReportFailure(kProgram, w);
    }
  }
  if (absl::Status d = psc::chief::ShutdownCluster(context.cluster, context.security, "job done");
      !d.ok()) {
    psc::base::Logf("%s: shutting the cluster down: %s", kProgram, std::string(d.message()));
  }
  return 0;
}
