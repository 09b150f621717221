// worker: computes gradients on its devices and pushes them to the servers.
#include <cstdio>
#include <memory>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "chief/chief_role.h"
#include "chief/coordinator_service.h"
#include "chief/grpc_worker_client.h"
#include "chief/task_registry.h"
#include "common/base/logging.h"
#include "common/base/status_macros.h"
#include "common/collective/memory_store.h"
#include "common/daemon/daemon.h"
#include "common/daemon/daemon_flags.h"
#include "common/daemon/daemon_metrics.h"
#include "common/job/job_data.h"
#include "common/job/job_export.h"
#include "common/job/job_flags.h"
#include "common/job/job_model.h"
#include "common/job/job_result.h"
#include "common/job/progress.h"
#include "common/rpc/grpc_parameter_client.h"
#include "ps_server/ps_service.h"
#include "worker/device_flags.h"
#include "worker/device_plan.h"
#include "worker/devices.h"
#include "worker/embedded_shard_client.h"
#include "worker/gpu_discovery.h"
#include "worker/grpc_coordinator_client.h"
#include "worker/grpc_store_client.h"
#include "worker/heartbeat.h"
#include "worker/standalone_trainer.h"
#include "worker/worker_core.h"
#include "worker/worker_metrics.h"
#include "worker/worker_service.h"

ABSL_FLAG(bool, standalone, false,
          "Train the job alone, with no servers and no TF_CONFIG: takes the job flags "
          "(--model, --optimizer, --learning_rate, --batch_size, --epochs, --steps_per_epoch, "
          "--max_train_examples, --data_dir, --seed, --metrics_out, --intra_op_threads) and the "
          "device flags.");
ABSL_FLAG(absl::Duration, heartbeat_interval, absl::Seconds(1),
          "How often to tell the chief this worker is alive (its Coordinator service); the "
          "chief declares a worker lost after --heartbeat_timeout without one. 0 = never.");
ABSL_FLAG(double, straggler_factor, 1.0,
          "An experiment knob: make this worker F times slower by idling (F - 1) times its "
          "compute time after computing each step's gradients, before pushing them (its "
          "compute per step, in the result file, is then F times another worker's). 1 = off; "
          "must be >= 1. `pscluster launch --straggler=INDEX:F` sets it on one worker.");
ABSL_FLAG(bool, list_devices, false,
          "Print the physical and logical devices this worker would use, then exit 0 "
          "(no TF_CONFIG needed).");

namespace {

constexpr char kProgram[] = "worker";

// The device flags against the machine's GPUs, found through the GPU plugin
// when one is asked for (worker/gpu_discovery.h); `gpus` keeps the plugin
// loaded. An error is INVALID_ARGUMENT (exit 2) for bad flags,
// FAILED_PRECONDITION (exit 1) for a GPU asked for and not usable (the
// plugin missing or unloadable included, naming its path and dlerror()).
absl::StatusOr<psc::worker::DeviceSetup> SetUpDevices(int task_index,
                                                      psc::worker::WorkerGpus* gpus) {
  PSC_ASSIGN_OR_RETURN(auto options, psc::worker::DeviceOptionsFromFlags());
  *gpus = psc::worker::DiscoverGpus(options.device, options.gpu_plugin);
  if (gpus->plugin != nullptr) {
    psc::base::Logf("worker: GPU plugin %s (%s)", gpus->plugin->path(), gpus->plugin->build());
  }
  PSC_ASSIGN_OR_RETURN(auto plan,
                       psc::worker::PlanDevices(options, gpus->gpus, gpus->why_none, task_index));
  if (plan.on_gpu() || plan.devices.size() > 1) {
    psc::base::Logf("worker: %d replica(s), on %s", static_cast<int>(plan.devices.size()),
                    plan.devices[0].name);
  }
  return psc::worker::DeviceSetup{std::move(options), std::move(plan), gpus->api()};
}

int PrintDevices() {
  int rc = 0;
  auto options = psc::worker::DeviceOptionsFromFlags();
  // What --device asks for; with bad device flags, what auto would find.
  const psc::worker::WorkerGpus gpus = psc::worker::DiscoverGpus(
      options.ok() ? options->device : psc::worker::DeviceKind::kAuto,
      options.ok() ? options->gpu_plugin : absl::GetFlag(FLAGS_gpu_plugin));
  absl::StatusOr<psc::worker::DevicePlan> plan =
      options.ok() ? psc::worker::PlanDevices(*options, gpus.gpus, gpus.why_none, 0)
                   : absl::StatusOr<psc::worker::DevicePlan>(options.status());
  if (plan.ok()) {
    std::printf("%s", psc::worker::FormatDevicePlan(*plan, gpus.gpus, gpus.why_none).c_str());
  } else {
    std::printf("%s", psc::worker::FormatDevicePlan({}, gpus.gpus, gpus.why_none).c_str());
    rc = psc::daemon::ReportFailure(kProgram, plan.status());
  }
  if (gpus.plugin != nullptr) {
    std::printf("GPU plugin: %s (%s)\nGPU libraries: %s\n", gpus.plugin->path().c_str(),
                gpus.plugin->build().c_str(), gpus.api()->LibraryVersions().c_str());
  } else {
    std::printf("GPU plugin: not loaded (%s)\n", gpus.why_none.c_str());
  }
  return rc;
}

int RunStandalone() {
  auto job = psc::job::JobSpecFromFlags();
  if (!job.ok()) return psc::daemon::ReportFailure(kProgram, job.status());
  if (job->strategy() != psc::proto::PARAMETER_SERVER && job->strategy() != psc::proto::MIRRORED) {
    return psc::daemon::ReportFailure(
        kProgram,
        absl::InvalidArgumentError(absl::StrCat(
            "--standalone trains alone: --strategy=", psc::job::StrategyName(job->strategy()),
            " needs a cluster (pscluster launch --strategy=...)")));
  }
  if (job->policy().wire_dtype() != psc::proto::DT_FLOAT32) {
    return psc::daemon::ReportFailure(
        kProgram, absl::InvalidArgumentError(
                      "--standalone trains alone: --wire_dtype is for what travels between "
                      "workers and ps tasks, and there are none"));
  }
  if (job->policy().topk_ratio() > 0) {
    return psc::daemon::ReportFailure(
        kProgram, absl::InvalidArgumentError(
                      "--standalone trains alone: --topk_ratio sparsifies what workers push to "
                      "ps tasks, and there are none"));
  }
  if (job->push().overlap()) {
    return psc::daemon::ReportFailure(
        kProgram, absl::InvalidArgumentError(
                      "--standalone trains alone: --push_overlap sends gradients to ps tasks, "
                      "and there are none"));
  }
  if (!job->callbacks().export_best().empty()) {
    return psc::daemon::ReportFailure(
        kProgram,
        absl::InvalidArgumentError("--standalone does not take --export_best (the chief's); "
                                   "--restore_best_weights exports the best epoch's weights"));
  }
  auto exports = psc::job::ExportOptionsFromFlags();
  if (!exports.ok()) return psc::daemon::ReportFailure(kProgram, exports.status());
  psc::worker::WorkerGpus gpus;
  auto devices = SetUpDevices(0, &gpus);
  if (!devices.ok()) return psc::daemon::ReportFailure(kProgram, devices.status());
  psc::job::ProgressPrinter progress(stdout);
  std::vector<std::vector<float>> params;
  auto result = psc::worker::TrainStandalone(*job, &progress, &params, *devices);
  if (!result.ok()) return psc::daemon::ReportFailure(kProgram, result.status());
  auto model = psc::job::ModelForJob(*job);
  if (!model.ok()) return psc::daemon::ReportFailure(kProgram, model.status());
  if (absl::Status s = psc::job::ExportModel(*exports, psc::job::ModelConfigJson(*job), *model,
                                             params, psc::job::RecordedPreprocessing(result->data));
      !s.ok()) {
    return psc::daemon::ReportFailure(kProgram, s);
  }
  std::printf("%s\n", psc::job::FinalLine(*result).c_str());
  result->peak_rss_mb = psc::job::PeakRssMb();
  const std::string out = absl::GetFlag(FLAGS_metrics_out);
  if (!out.empty()) {
    if (absl::Status s = psc::job::WriteJobResult(out, *result); !s.ok()) {
      return psc::daemon::ReportFailure(kProgram, s);
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  psc::daemon::InitDaemon(
      "a pscluster worker (one \"worker\" task of TF_CONFIG).\n"
      "Usage: TF_CONFIG='{...}' worker [flags]   or   worker --tf_config=@file [flags]",
      argc, argv);
  if (absl::GetFlag(FLAGS_list_devices)) return PrintDevices();
  if (absl::GetFlag(FLAGS_standalone)) return RunStandalone();
  const absl::Duration interval = absl::GetFlag(FLAGS_heartbeat_interval);
  if (interval < absl::ZeroDuration()) {
    return psc::daemon::ReportFailure(
        kProgram, absl::InvalidArgumentError("--heartbeat_interval must not be negative"));
  }
  const double straggler_factor = absl::GetFlag(FLAGS_straggler_factor);
  if (!(straggler_factor >= 1.0 && straggler_factor <= 1000.0)) {
    return psc::daemon::ReportFailure(
        kProgram, absl::InvalidArgumentError(absl::StrCat(
                      "--straggler_factor=", straggler_factor,
                      ": must be in [1, 1000] (1 = not slowed; 3 = three times slower)")));
  }
  // A cluster without ps tasks is a collective one (multi_worker_mirrored):
  // this worker holds a full replica and all-reduces with its peers.
  psc::daemon::DaemonStart start = psc::daemon::PrepareDaemon(
      kProgram, psc::cluster::TaskType::kWorker, psc::cluster::ClusterConfig::Layout::kAny);
  if (!start.context) return start.exit_code;
  const psc::daemon::DaemonContext& context = *start.context;
  const int task_index = context.cluster.task_index();
  const bool collective = context.cluster.num_tasks(psc::cluster::TaskType::kPs) == 0;
  const auto& chiefs = context.cluster.tasks(psc::cluster::TaskType::kChief);
  // With no chief task, worker 0 of a collective cluster is the chief too
  // (as TensorFlow's worker 0 is): it takes the job flags.
  const bool chief_here = collective && chiefs.empty() && task_index == 0;
  absl::StatusOr<psc::proto::JobSpec> job = absl::UnknownError("no job");
  if (chief_here) {
    job = psc::chief::ChiefJobFromFlags();
    if (!job.ok()) return psc::daemon::ReportFailure(kProgram, job.status());
    if (job->strategy() != psc::proto::MULTI_WORKER_MIRRORED) {
      return psc::daemon::ReportFailure(
          kProgram,
          absl::InvalidArgumentError(
              "TF_CONFIG lists no ps and no chief: worker 0 runs the job itself, which takes "
              "--strategy=multi_worker_mirrored"));
    }
  }
  if (collective && chiefs.empty() &&
      context.cluster.num_tasks(psc::cluster::TaskType::kWorker) < 1) {
    return psc::daemon::ReportFailure(kProgram,
                                      absl::InvalidArgumentError("TF_CONFIG lists no worker"));
  }
  psc::worker::WorkerGpus gpus;  // outlives everything that computes
  auto devices = SetUpDevices(task_index, &gpus);
  if (!devices.ok()) return psc::daemon::ReportFailure(kProgram, devices.status());
  psc::base::ShutdownSignal shutdown;
  std::vector<std::string> ps_addresses;
  for (const psc::cluster::TaskAddress& t : context.cluster.tasks(psc::cluster::TaskType::kPs)) {
    ps_addresses.push_back(t.address.ToString());
  }
  std::unique_ptr<psc::rpc::GrpcParameterClient> servers;
  if (!collective) {
    servers = std::make_unique<psc::rpc::GrpcParameterClient>(
        ps_addresses, context.security, absl::Seconds(60), absl::GetFlag(FLAGS_data_channel));
  }
  // The coordinator: the chief task, or worker 0.
  const std::string coordinator_address =
      !chiefs.empty()
          ? chiefs[0].address.ToString()
          : context.cluster.tasks(psc::cluster::TaskType::kWorker)[0].address.ToString();
  // multi_worker_mirrored: the replica, served to the chief as a ps shard.
  psc::base::RealClock clock;
  std::unique_ptr<psc::ps_server::ShardServer> replica;
  std::unique_ptr<psc::worker::EmbeddedShardClient> replica_client;
  std::unique_ptr<psc::ps_server::ParameterServerService> replica_service;
  std::unique_ptr<psc::worker::GrpcStoreClient> store;
  psc::worker::CollectiveSetup collective_setup;
  if (collective) {
    psc::ps_server::ShardServerOptions options;
    options.shard.clock = &clock;
    replica = std::make_unique<psc::ps_server::ShardServer>(options);
    replica_client = std::make_unique<psc::worker::EmbeddedShardClient>(replica.get(), &clock);
    replica_service = std::make_unique<psc::ps_server::ParameterServerService>(
        replica.get(), context.security.token, &shutdown);
    store = std::make_unique<psc::worker::GrpcStoreClient>(coordinator_address, context.security);
    collective_setup.store = store.get();
    collective_setup.hostname = context.cluster.self().address.host;
  }
  psc::worker::WorkerCore core(task_index, psc::worker::ListDevices(task_index, gpus.gpus),
                               servers.get(), *std::move(devices), replica_client.get(),
                               &collective_setup);
  core.set_straggler_factor(absl::GetFlag(FLAGS_straggler_factor));
  // Worker 0 as the chief: the job's gauges too.
  psc::chief::JobGauges chief_gauges;
  auto metrics = psc::daemon::StartMetricsFromFlags(
      kProgram, context.listen.host, "worker",
      [&core, &servers, &chief_gauges, task_index, chief_here] {
        auto families = psc::worker::WorkerMetricFamilies(
            task_index, core.counters(),
            servers ? servers->call_counts() : psc::ps_client::ParameterServerClient::CallCounts{});
        if (chief_here) {
          for (auto& f : psc::chief::ChiefMetricFamilies(chief_gauges.Get())) {
            families.push_back(std::move(f));
          }
        }
        return families;
      });
  if (!metrics.ok()) return psc::daemon::ReportFailure(kProgram, metrics.status());
  // Heartbeats to the coordinator, which declares a worker lost when they stop.
  std::unique_ptr<psc::worker::GrpcCoordinatorClient> coordinator;
  std::unique_ptr<psc::worker::Heartbeat> heartbeat;
  if ((!chiefs.empty() || collective) && interval > absl::ZeroDuration()) {
    coordinator =
        std::make_unique<psc::worker::GrpcCoordinatorClient>(coordinator_address, context.security);
    heartbeat = std::make_unique<psc::worker::Heartbeat>(
        coordinator.get(), task_index, psc::worker::NewIncarnation(), interval,
        [&core] { return core.CurrentProgress(); });
    heartbeat->Start();
  }
  psc::worker::WorkerService service(&core, context.security.token, &shutdown);
  std::vector<grpc::Service*> services = {&service};
  if (replica_service) services.push_back(replica_service.get());
  // Worker 0 as the chief: the Coordinator (and the groups' store) on this
  // port, and the job on a thread of its own once serving.
  std::unique_ptr<psc::chief::TaskRegistry> registry;
  psc::collective::MemoryStore chief_store;
  std::unique_ptr<psc::chief::CoordinatorService> coordinator_service;
  std::thread chief_thread;
  int chief_exit = 0;
  if (chief_here) {
    registry = std::make_unique<psc::chief::TaskRegistry>(&context.cluster, &clock);
    coordinator_service = std::make_unique<psc::chief::CoordinatorService>(
        registry.get(), context.security.token, &chief_store);
    services.push_back(coordinator_service.get());
    chief_thread = std::thread([&] {
      absl::StatusOr<psc::job::JobResult> outcome = psc::chief::RunChiefJob(
          context, *job, registry.get(), &chief_store, [&shutdown] { return shutdown.requested(); },
          &chief_gauges);
      chief_gauges.Update([](psc::chief::JobGauges::Snapshot* g) { g->finished = true; });
      if (!outcome.ok()) {
        // Nobody else drives the job: stop every task instead of leaving
        // them waiting.
        (void)psc::chief::ShutdownCluster(context.cluster, context.security, "the job failed");
      }
      chief_exit =
          psc::chief::FinishChiefJob(kProgram, context, std::move(outcome), registry.get());
      shutdown.Request("job finished");
    });
  }
  const int rc = psc::daemon::ServeUntilShutdown(kProgram, context, services, &shutdown,
                                                 [&heartbeat, &core, &replica, &chief_thread] {
                                                   // Worker 0 as the chief: its job stops after the
                                                   // current unit (it sees the shutdown) while this
                                                   // worker still serves its own units.
                                                   if (chief_thread.joinable()) chief_thread.join();
                                                   if (heartbeat) heartbeat->Stop();
                                                   core.Stop();
                                                   if (replica) replica->Stop();
                                                 });
  shutdown.Request("the worker stopped");  // a server that never started ends the job too
  if (chief_thread.joinable()) chief_thread.join();
  return rc != 0 ? rc : chief_exit;
}
