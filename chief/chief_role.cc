#include "chief/chief_role.h"

#include <algorithm>
#include <cstdio>
#include <memory>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "chief/cluster_waiter.h"
#include "chief/final_evaluation.h"
#include "chief/grpc_task_prober.h"
#include "chief/grpc_worker_client.h"
#include "chief/replica_group_client.h"
#include "common/base/logging.h"
#include "common/base/shutdown.h"
#include "common/base/status_macros.h"
#include "common/daemon/daemon_flags.h"
#include "common/job/job_export.h"
#include "common/job/job_flags.h"
#include "common/job/output_dirs.h"
#include "common/job/progress.h"
#include "common/rpc/grpc_parameter_client.h"

ABSL_FLAG(absl::Duration, startup_timeout, absl::Seconds(60),
          "How long to wait for the cluster's tasks to answer, e.g. 30s or 2m.");
ABSL_FLAG(std::string, checkpoint_dir, "",
          "Checkpoint the servers here, and resume from the latest checkpoint found here.");
ABSL_FLAG(int64_t, checkpoint_every_steps, 0,
          "Checkpoint every N global steps (and at the end); 0 = only at the end.");
ABSL_FLAG(int64_t, unit_steps, 20, "Steps per work unit handed to each worker.");
ABSL_FLAG(int64_t, eval_every_steps, 0,
          "Also evaluate on the validation split every N global steps (units end there), "
          "recording each point's step, training time and examples seen in the result file "
          "(\"evaluations\") and in TensorBoard (evaluation_*_vs_iterations); 0 = only at "
          "epoch ends.");
ABSL_FLAG(int32_t, eval_threads, 0, "CPU threads of the chief's evaluation; 0 = all cores.");
ABSL_FLAG(std::string, logdir, "", "Write TensorBoard event files (scalars per epoch) here.");
ABSL_FLAG(absl::Duration, heartbeat_timeout, absl::Seconds(30),
          "A worker that registered with this chief and sent no heartbeat for this long is lost "
          "(its unit is handed over, the servers stop waiting for it); 0 = only a failed unit "
          "of a worker that no longer answers is a loss.");
ABSL_FLAG(int32_t, max_workers, 0,
          "Workers the job may hold: TF_CONFIG's plus those that join while it runs (`worker "
          "--join`, or a worker that TF_CONFIG lists beyond the chief's, as a scaled TFJob's). "
          "0 = TF_CONFIG's count (nobody joins). async and ssp give a joined worker units at "
          "once; sync only into a vacant slot (a lost or drained worker's). The parameter_server "
          "strategy only.");
ABSL_FLAG(absl::Duration, evaluator_wait, absl::Minutes(5),
          "With an evaluator (in TF_CONFIG, or one that announced itself to the chief) and "
          "--checkpoint_dir: after the final checkpoint, wait up to this long for the evaluator to "
          "report it evaluated before exiting (Kubernetes' operator deletes the other pods once "
          "the chief succeeds); 0 = do not wait.");

namespace psc {
namespace chief {

absl::StatusOr<proto::JobSpec> ChiefJobFromFlags() {
  PSC_ASSIGN_OR_RETURN(proto::JobSpec job, job::JobSpecFromFlags());
  if (job.strategy() == proto::MIRRORED) {
    return absl::InvalidArgumentError(
        "--strategy=mirrored trains on one worker's devices with no chief and no servers: run "
        "`worker --standalone --strategy=mirrored` or `pscluster launch --strategy=mirrored`");
  }
  if (absl::GetFlag(FLAGS_startup_timeout) < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--startup_timeout must not be negative");
  }
  if (absl::GetFlag(FLAGS_evaluator_wait) < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--evaluator_wait must not be negative");
  }
  if (const int64_t n = absl::GetFlag(FLAGS_eval_every_steps); n < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--eval_every_steps=", n, ": must be >= 0 (0 = only at epoch ends)"));
  }
  if (absl::GetFlag(FLAGS_checkpoint_every_steps) < 0 || absl::GetFlag(FLAGS_unit_steps) < 1 ||
      absl::GetFlag(FLAGS_eval_threads) < 0) {
    return absl::InvalidArgumentError(
        "--checkpoint_every_steps must be >= 0, --unit_steps >= 1, --eval_threads >= 0");
  }
  PSC_RETURN_IF_ERROR(job::ExportOptionsFromFlags().status());
  // Found now, not at the first checkpoint (by default the end of the run).
  PSC_RETURN_IF_ERROR(
      job::CheckOutputDirectory("--checkpoint_dir", absl::GetFlag(FLAGS_checkpoint_dir)));
  PSC_RETURN_IF_ERROR(job::CheckOutputDirectory("--logdir", absl::GetFlag(FLAGS_logdir)));
  if (absl::GetFlag(FLAGS_heartbeat_timeout) < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--heartbeat_timeout must not be negative");
  }
  if (const int32_t n = absl::GetFlag(FLAGS_max_workers); n < 0 || n > kMaxWorkerSeats) {
    return absl::InvalidArgumentError(absl::StrCat("--max_workers=", n, ": must be in [0, ",
                                                   kMaxWorkerSeats, "] (0 = TF_CONFIG's workers)"));
  }
  if (absl::GetFlag(FLAGS_max_workers) > 0 && job.strategy() != proto::PARAMETER_SERVER &&
      job.strategy() != proto::STRATEGY_UNSPECIFIED) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max_workers lets workers join a parameter_server job; --strategy=",
                     job::StrategyName(job.strategy()), " trains on TF_CONFIG's workers only"));
  }
  return job;
}

absl::Status CheckMaxWorkers(const cluster::ClusterConfig& cluster) {
  const int n = absl::GetFlag(FLAGS_max_workers);
  const int workers = cluster.num_tasks(cluster::TaskType::kWorker);
  if (n > 0 && n < workers) {
    return absl::InvalidArgumentError(absl::StrCat("--max_workers=", n, " is fewer than the ",
                                                   workers, " workers TF_CONFIG lists"));
  }
  return absl::OkStatus();
}

TaskRegistryOptions RegistryOptionsFromFlags() {
  TaskRegistryOptions options;
  options.max_workers = absl::GetFlag(FLAGS_max_workers);
  options.heartbeat_timeout = absl::GetFlag(FLAGS_heartbeat_timeout);
  if (options.heartbeat_timeout <= absl::ZeroDuration()) {
    options.heartbeat_timeout = absl::Seconds(30);
  }
  return options;
}

cluster::ClusterConfig::Layout LayoutFor(proto::Strategy strategy) {
  return strategy == proto::MULTI_WORKER_MIRRORED
             ? cluster::ClusterConfig::Layout::kCollective
             : cluster::ClusterConfig::Layout::kParameterServer;
}

namespace {

// central_storage is the ps strategy on one host: one ps, one worker (with
// its local replicas).
absl::Status CheckCentralStorage(const cluster::ClusterConfig& cluster) {
  const int ps = cluster.num_tasks(cluster::TaskType::kPs);
  const int workers = cluster.num_tasks(cluster::TaskType::kWorker);
  if (ps != 1 || workers != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--strategy=central_storage keeps the variables on one ps beside one worker (its "
        "devices are the replicas); TF_CONFIG lists ",
        ps, " ps and ", workers, " workers"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<job::JobResult> RunChiefJob(const daemon::DaemonContext& context,
                                           const proto::JobSpec& job, TaskRegistry* registry,
                                           collective::KeyValueStore* group_store,
                                           const std::function<bool()>& interrupted,
                                           JobGauges* gauges) {
  if (job.strategy() == proto::CENTRAL_STORAGE) {
    PSC_RETURN_IF_ERROR(CheckCentralStorage(context.cluster));
  }
  const absl::Duration timeout = absl::GetFlag(FLAGS_startup_timeout);
  GrpcTaskProber prober(context.security);
  base::RealClock clock;
  ClusterWaitOptions wait;
  wait.timeout = timeout;
  wait.cancelled = interrupted;
  ClusterWaitResult found = WaitForCluster(TasksToWaitFor(context.cluster), prober, clock, wait);
  std::printf("%s", found.Table().c_str());
  std::fflush(stdout);
  PSC_RETURN_IF_ERROR(found.ToStatus(timeout));
  base::Logf("chief: cluster ready: %d tasks answer in %s", found.tasks.size(),
             absl::FormatDuration(absl::Trunc(found.elapsed, absl::Milliseconds(1))));

  std::vector<std::string> ps_addresses, worker_addresses;
  for (const auto& t : context.cluster.tasks(cluster::TaskType::kPs))
    ps_addresses.push_back(t.address.ToString());
  for (const auto& t : context.cluster.tasks(cluster::TaskType::kWorker)) {
    worker_addresses.push_back(t.address.ToString());
  }
  // The servers: the ps tasks, or (multi_worker_mirrored) each worker's
  // embedded replica, reached over gRPC on the worker's own port.
  std::unique_ptr<ps_client::ParameterClient> ps;
  std::vector<std::unique_ptr<rpc::GrpcParameterClient>> replicas;
  std::unique_ptr<ReplicaGroupClient> group;
  ps_client::ParameterClient* servers = nullptr;
  if (job.strategy() == proto::MULTI_WORKER_MIRRORED) {
    std::vector<ps_client::ParameterClient*> each;
    for (const std::string& a : worker_addresses) {
      replicas.push_back(std::make_unique<rpc::GrpcParameterClient>(
          std::vector<std::string>{a}, context.security, absl::Seconds(60),
          /*data_channel=*/false));
      each.push_back(replicas.back().get());
    }
    group = std::make_unique<ReplicaGroupClient>(std::move(each));
    servers = group.get();
  } else {
    ps = std::make_unique<rpc::GrpcParameterClient>(
        ps_addresses, context.security, absl::Seconds(60), absl::GetFlag(FLAGS_data_channel));
    servers = ps.get();
  }
  // Seats beyond TF_CONFIG's workers for those that join (--max_workers).
  const int seats = job.strategy() == proto::MULTI_WORKER_MIRRORED ? 0 : registry->max_workers();
  GrpcWorkerClient workers(worker_addresses, context.security, seats);
  job::ProgressPrinter progress(stdout);
  JobRunnerOptions options;
  options.job = job;
  options.checkpoint_dir = absl::GetFlag(FLAGS_checkpoint_dir);
  options.checkpoint_every_steps = absl::GetFlag(FLAGS_checkpoint_every_steps);
  options.unit_steps = absl::GetFlag(FLAGS_unit_steps);
  options.eval_every_steps = absl::GetFlag(FLAGS_eval_every_steps);
  options.eval_threads = absl::GetFlag(FLAGS_eval_threads);
  options.logdir = absl::GetFlag(FLAGS_logdir);
  PSC_ASSIGN_OR_RETURN(options.exports, job::ExportOptionsFromFlags());
  options.progress = &progress;
  options.gauges = gauges;
  options.registry = registry;
  options.initial_workers = static_cast<int>(worker_addresses.size());
  options.heartbeat_timeout = absl::GetFlag(FLAGS_heartbeat_timeout);
  options.stop_after_unit = [interrupted](int64_t) { return interrupted(); };
  options.interrupted = interrupted;
  options.replica_group = group.get();
  options.group_store = group_store;
  return RunJob(options, servers, &workers);
}

int FinishChiefJob(const char* program, const daemon::DaemonContext& context,
                   absl::StatusOr<job::JobResult> outcome, const TaskRegistry* registry) {
  if (!outcome.ok()) return daemon::ReportFailure(program, outcome.status());
  std::printf("%s\n", job::FinalLine(*outcome).c_str());
  outcome->peak_rss_mb = job::PeakRssMb();
  std::fflush(stdout);
  const std::string out = absl::GetFlag(FLAGS_metrics_out);
  if (!out.empty()) {
    if (absl::Status w = job::WriteJobResult(out, *outcome); !w.ok()) {
      return daemon::ReportFailure(program, w);
    }
  }
  if (registry != nullptr && !absl::GetFlag(FLAGS_checkpoint_dir).empty()) {
    base::RealClock clock;
    (void)WaitForFinalEvaluation(program, *registry, outcome->steps,
                                 absl::GetFlag(FLAGS_evaluator_wait), &clock);
  }
  if (absl::Status d = ShutdownCluster(
          context.cluster, context.security, "job done",
          registry != nullptr ? registry->JoinedWorkers() : std::map<int, std::string>());
      !d.ok()) {
    base::Logf("%s: shutting the cluster down: %s", program, std::string(d.message()));
  }
  return 0;
}

}  // namespace chief
}  // namespace psc
