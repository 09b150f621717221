// chief: coordinates the cluster. It waits for every ps and worker to
// answer, runs the training job (chief/job_runner.h), writes the result
// file, and shuts the cluster down. --check_cluster only checks and changes
// nothing.
#include <cstdio>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "chief/chief_role.h"
#include "chief/cluster_waiter.h"
#include "chief/coordinator_service.h"
#include "chief/grpc_task_prober.h"
#include "chief/grpc_worker_client.h"
#include "chief/job_gauges.h"
#include "chief/job_runner.h"
#include "chief/task_registry.h"
#include "common/base/logging.h"
#include "common/collective/memory_store.h"
#include "common/daemon/daemon.h"
#include "common/daemon/daemon_flags.h"
#include "common/daemon/daemon_metrics.h"
#include "common/job/job_data.h"
#include "common/job/job_export.h"
#include "common/job/job_flags.h"
#include "common/job/job_result.h"
#include "common/job/progress.h"
#include "common/job/step_batch.h"
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
    job = psc::chief::ChiefJobFromFlags();
    if (!job.ok()) return psc::daemon::ReportFailure(kProgram, job.status());
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
  absl::StatusOr<psc::proto::Strategy> strategy =
      psc::job::ParseStrategy(absl::GetFlag(FLAGS_strategy));
  if (!strategy.ok()) return psc::daemon::ReportFailure(kProgram, strategy.status());
  psc::daemon::DaemonStart start = psc::daemon::PrepareDaemon(
      kProgram, psc::cluster::TaskType::kChief, psc::chief::LayoutFor(*strategy));
  if (!start.context) return start.exit_code;
  const psc::daemon::DaemonContext& context = *start.context;
  if (job.ok()) {
    // What needs the cluster's shape: --replicas_to_aggregate against the
    // workers, before any of them is waited for.
    const int workers = context.cluster.num_tasks(psc::cluster::TaskType::kWorker);
    if (absl::Status s = psc::job::ValidateStepBatch(*job, workers); !s.ok()) {
      return psc::daemon::ReportFailure(kProgram, s);
    }
    if (absl::Status s = psc::chief::CheckMaxWorkers(context.cluster); !s.ok()) {
      return psc::daemon::ReportFailure(kProgram, s);
    }
  }

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

  // The job's gauges on --metrics_port, from before the cluster is found.
  psc::chief::JobGauges gauges;
  auto metrics = psc::daemon::StartMetricsFromFlags(
      kProgram, context.listen.host, "chief",
      [&gauges] { return psc::chief::ChiefMetricFamilies(gauges.Get()); });
  if (!metrics.ok()) return psc::daemon::ReportFailure(kProgram, metrics.status());

  // Serve the Coordinator (and, for multi_worker_mirrored, the collective
  // groups' rendezvous store) while finding the cluster and training.
  psc::base::RealClock clock;
  psc::chief::TaskRegistry registry(&context.cluster, &clock,
                                    psc::chief::RegistryOptionsFromFlags());
  psc::collective::MemoryStore store;
  psc::chief::CoordinatorService coordinator(&registry, context.security.token, &store);
  auto server = psc::rpc::GrpcServer::Start({context.listen, context.security}, {&coordinator});
  if (!server.ok()) return psc::daemon::ReportFailure(kProgram, server.status());
  // The model and the data too (a missing or partial --data_dir exits 2
  // here), before the cluster is waited for. After the Coordinator serves,
  // so that the workers' first heartbeats find it (they register with them).
  if (absl::StatusOr<std::string> summary = job.ok() ? psc::job::CheckJob(*job) : std::string();
      !summary.ok()) {
    (*server)->Shutdown(absl::ZeroDuration());
    return psc::daemon::ReportFailure(kProgram, summary.status());
  } else if (!summary->empty()) {
    // What will train, resolved: the optimizer and where it came from, the
    // loss, the data and its preprocessing.
    psc::base::Logf("%s: %s", kProgram, *summary);
  }
  psc::base::Logf("%s: serving on %s; waiting up to %s for %d tasks", kProgram,
                  (*server)->address(), absl::FormatDuration(timeout),
                  psc::chief::TasksToWaitFor(context.cluster).size());

  // The job, on a thread of its own while this thread watches the signals;
  // a signal cancels the cluster wait, or stops the job at the next unit.
  psc::base::ShutdownSignal interrupted;
  absl::StatusOr<psc::job::JobResult> outcome = absl::UnknownError("not run");
  psc::base::ShutdownSignal finished;
  std::thread runner([&] {
    outcome = psc::chief::RunChiefJob(
        context, *job, &registry, &store, [&interrupted] { return interrupted.requested(); },
        &gauges);
    gauges.Update([](psc::chief::JobGauges::Snapshot* g) { g->finished = true; });
    registry.Close("the job has ended");
    finished.Request("job finished");
  });
  std::thread watcher([&] {
    const std::string reason = interrupted.Wait();
    if (reason != "job finished") {
      psc::base::Logf("%s: %s: stopping after the current unit", kProgram, reason);
      registry.CloseJoins(absl::StrCat("the chief is stopping (", reason, ")"));
    }
  });
  finished.Wait();
  interrupted.Request("job finished");
  runner.join();
  watcher.join();
  // Still serving: the evaluator reports its final evaluation to the
  // Coordinator while FinishChiefJob waits for it.
  const int code = psc::chief::FinishChiefJob(kProgram, context, std::move(outcome), &registry);
  (*server)->Shutdown(absl::GetFlag(FLAGS_shutdown_grace));
  return code;
}
