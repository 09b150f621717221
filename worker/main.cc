// worker: computes gradients on its devices and pushes them to the servers.
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "chief/chief_role.h"
#include "chief/coordinator_service.h"
#include "chief/grpc_worker_client.h"
#include "chief/task_registry.h"
#include "common/base/incarnation.h"
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
#include "worker/drain.h"
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
ABSL_FLAG(std::string, join, "",
          "Join the running job of the chief at HOST:PORT instead of reading TF_CONFIG: the "
          "chief (started with --max_workers above its TF_CONFIG's workers) gives this worker "
          "a seat and the ps tasks' addresses. Needs --advertise_address; the cluster token "
          "(--auth_token_file) as every task. SIGTERM drains it (--drain_timeout).");
ABSL_FLAG(std::string, advertise_address, "",
          "With --join, or a TF_CONFIG that lists this worker's index beyond its \"worker\" "
          "list (a StatefulSet scaled up): the HOST:PORT the chief and the ps tasks reach this "
          "worker at (it listens there, or at --bind). A wildcard host (0.0.0.0) is refused; a "
          "non-loopback one needs a token, as every listening task. Ignored when TF_CONFIG "
          "lists this worker (its address is there).");
ABSL_FLAG(absl::Duration, drain_timeout, absl::Minutes(2),
          "On SIGTERM/SIGINT while a chief runs the job: ask the chief to leave, finish the "
          "running unit, and exit 0 once the chief took this worker out of the job; exit 1 "
          "if that did not happen within this long (the chief then counts it lost) or the "
          "chief refused (the job's last worker; sync where the others would not split "
          "--batch_size). 0 = stop at once, without draining.");
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
  if (!absl::GetFlag(FLAGS_wire_dtype).empty() &&
      job->policy().wire_dtype() != psc::proto::DT_FLOAT32) {
    return psc::daemon::ReportFailure(
        kProgram, absl::InvalidArgumentError(
                      "--standalone trains alone: --wire_dtype is for what travels between "
                      "workers and ps tasks, and there are none"));
  }
  job->mutable_policy()->set_wire_dtype(psc::proto::DT_FLOAT32);  // not a mixed model's default
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

// Leaves the job drained (worker/drain.h); the exit code: 0 once out of
// the job (or the chief does not know this worker), 1 otherwise.
int DrainWorker(psc::worker::CoordinatorClient* chief, int index, uint64_t incarnation,
                absl::Duration timeout) {
  psc::base::Logf("worker: worker:%d leaves the job: finishing its unit (up to --drain_timeout=%s)",
                  index, absl::FormatDuration(timeout));
  psc::base::RealClock clock;
  psc::worker::DrainOptions options;
  options.timeout = timeout;
  const absl::Status s = psc::worker::Drain(chief, index, incarnation, options, &clock);
  if (s.ok()) {
    psc::base::Logf("worker: worker:%d left the job, drained", index);
    return 0;
  }
  if (absl::IsNotFound(s) || absl::IsUnavailable(s)) {
    psc::base::Logf("worker: no job to leave (%s)", std::string(s.message()));
    return 0;
  }
  psc::base::Logf("worker: worker:%d did not leave drained: %s", index, std::string(s.message()));
  return psc::daemon::kExitFailure;
}

// --join: takes a seat of the chief's running job (Coordinator.Join,
// retried while the chief does not answer, up to --startup_timeout) and
// returns this worker's context: the chief's cluster with this worker at
// its index.
absl::StatusOr<psc::daemon::DaemonContext> JoinRunningJob(const std::string& chief,
                                                          uint64_t incarnation, int preferred) {
  const std::string advertise = absl::GetFlag(FLAGS_advertise_address);
  if (advertise.empty()) {
    return absl::InvalidArgumentError(
        "--join needs --advertise_address=HOST:PORT: the address the chief and the ps tasks "
        "reach this worker at");
  }
  PSC_ASSIGN_OR_RETURN(const psc::cluster::HostPort self, psc::cluster::ParseHostPort(advertise));
  if (self.host == "0.0.0.0" || self.host == "::" || self.port == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--advertise_address=", advertise,
        ": give the address others reach this worker at, not a wildcard host or port 0 "
        "(--bind sets where it listens)"));
  }
  if (absl::GetFlag(FLAGS_heartbeat_interval) <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        "--join needs heartbeats (--heartbeat_interval > 0): the chief keeps a joined worker "
        "by them");
  }
  // The chief and this worker, for the security checks and the listening
  // address, until the chief says the rest.
  PSC_ASSIGN_OR_RETURN(psc::cluster::ClusterConfig provisional,
                       psc::cluster::ClusterConfig::Parse(absl::StrCat(
                           R"({"cluster": {"chief": [")", chief, R"("], "worker": [")",
                           self.ToString(), R"("]}, "task": {"type": "worker", "index": 0}})")));
  PSC_ASSIGN_OR_RETURN(psc::daemon::DaemonContext context,
                       psc::daemon::LoadDaemonContext(std::move(provisional)));
  psc::worker::GrpcCoordinatorClient coordinator(chief, context.security);
  psc::proto::JoinRequest request;
  request.set_address(self.ToString());
  request.set_incarnation(incarnation);
  request.set_preferred_index(preferred);
  const absl::Time give_up = absl::Now() + absl::GetFlag(FLAGS_startup_timeout);
  absl::StatusOr<psc::proto::JoinResponse> joined = absl::UnavailableError("not asked");
  bool told = false;
  for (;;) {
    joined = coordinator.Join(request);
    if (joined.ok() || psc::worker::IsFinalRefusal(joined.status()) || absl::Now() >= give_up) {
      break;
    }
    if (absl::IsAlreadyExists(joined.status()) && !told) {
      // Itself before a restart: the chief takes it once that is silent.
      psc::base::Logf("worker: %s; trying again up to --startup_timeout",
                      std::string(joined.status().message()));
      told = true;
    }
    absl::SleepFor(absl::Milliseconds(500));
  }
  if (!joined.ok()) return joined.status();
  PSC_ASSIGN_OR_RETURN(context.cluster, psc::cluster::ClusterConfig::ForJoinedWorker(
                                            joined->cluster_json(), joined->index(), self));
  PSC_RETURN_IF_ERROR(
      context.cluster.ValidateForTraining(psc::cluster::ClusterConfig::Layout::kParameterServer));
  psc::base::Logf("worker: joined the job of the chief at %s as worker:%d (%s)", chief,
                  joined->index(), self.ToString());
  return context;
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
  if (absl::GetFlag(FLAGS_drain_timeout) < absl::ZeroDuration()) {
    return psc::daemon::ReportFailure(
        kProgram, absl::InvalidArgumentError("--drain_timeout must not be negative"));
  }
  const uint64_t incarnation = psc::base::NewIncarnation();
  // A cluster without ps tasks is a collective one (multi_worker_mirrored):
  // this worker holds a full replica and all-reduces with its peers.
  const std::string join = absl::GetFlag(FLAGS_join);
  psc::daemon::DaemonStart start;
  // A StatefulSet scaled up while its cluster is fixed in the pod template:
  // TF_CONFIG lists this worker's index beyond its workers. It joins the
  // chief named there at --advertise_address, asking for that index.
  std::optional<psc::cluster::WorkerBeyondCluster> beyond;
  if (join.empty()) {
    if (auto text = psc::cluster::ReadTfConfigText(absl::GetFlag(FLAGS_tf_config),
                                                   std::getenv("TF_CONFIG"));
        text.ok()) {
      if (auto b = psc::cluster::FindWorkerBeyondCluster(*text); b.ok()) beyond = *b;
    }
  }
  if (beyond.has_value() && absl::GetFlag(FLAGS_advertise_address).empty()) {
    return psc::daemon::ReportFailure(
        kProgram,
        absl::InvalidArgumentError(absl::StrCat(
            "TF_CONFIG: task.index ", beyond->index,
            " is beyond the cluster's \"worker\" list: to join the running job of the chief at ",
            beyond->chief,
            ", give --advertise_address=HOST:PORT (where the chief and the ps "
            "tasks reach this worker)")));
  }
  if (beyond.has_value() && absl::GetFlag(FLAGS_dry_run)) {
    // What it would do: join the chief's job at its address.
    std::printf(
        "{\"task_type\": \"worker\", \"task_index\": %d, \"address\": \"%s\", \"join\": "
        "\"%s\"}\n",
        beyond->index, absl::GetFlag(FLAGS_advertise_address).c_str(), beyond->chief.c_str());
    return 0;
  }
  const std::string coordinator_of_join = beyond.has_value() ? beyond->chief : join;
  if (coordinator_of_join.empty()) {
    start = psc::daemon::PrepareDaemon(kProgram, psc::cluster::TaskType::kWorker,
                                       psc::cluster::ClusterConfig::Layout::kAny);
  } else {
    absl::StatusOr<psc::daemon::DaemonContext> joined =
        JoinRunningJob(coordinator_of_join, incarnation, beyond.has_value() ? beyond->index : -1);
    if (!joined.ok()) return psc::daemon::ReportFailure(kProgram, joined.status());
    start.context = *std::move(joined);
  }
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
      !coordinator_of_join.empty() ? coordinator_of_join
      : !chiefs.empty()
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
  absl::Mutex refused_mu;
  absl::Status refused;  // a join the chief refused for good
  if ((!chiefs.empty() || collective) && interval > absl::ZeroDuration()) {
    coordinator =
        std::make_unique<psc::worker::GrpcCoordinatorClient>(coordinator_address, context.security);
    // A worker beyond the chief's TF_CONFIG (a scaled TFJob) joins at its
    // own address; a refusal ends it.
    heartbeat = std::make_unique<psc::worker::Heartbeat>(
        coordinator.get(), task_index, incarnation, interval,
        [&core] { return core.CurrentProgress(); }, context.cluster.self().address.ToString(),
        /*joined=*/!coordinator_of_join.empty(),
        [&](const absl::Status& s) {
          {
            absl::MutexLock lock(&refused_mu);
            refused = s;
          }
          shutdown.Request(absl::StrCat("the chief refused this worker: ", s.message()));
        },
        [&core] {
          // A restarted chief never gave this worker the unit it may still
          // run: end it before the servers are restored under it.
          if (absl::Status s = core.EndOrphanedUnit(); !s.ok()) {
            psc::base::Logf("worker: ending the unit of the chief that is gone: %s",
                            std::string(s.message()));
          }
        });
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
      registry->Close("the job has ended");
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
  int drain_exit = 0;
  const int rc = psc::daemon::ServeUntilShutdown(
      kProgram, context, services, &shutdown,
      [&heartbeat, &core, &replica, &chief_thread, &coordinator, &shutdown, &drain_exit, task_index,
       incarnation, chief_here] {
        // Asked to stop by a signal while a chief
        // runs the job: leave it drained first.
        const std::string why = shutdown.Wait();
        const absl::Duration d = absl::GetFlag(FLAGS_drain_timeout);
        if (coordinator && !chief_here && d > absl::ZeroDuration() &&
            (why == "SIGTERM" || why == "SIGINT")) {
          drain_exit = DrainWorker(coordinator.get(), task_index, incarnation, d);
        }
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
  {
    absl::MutexLock lock(&refused_mu);
    if (!refused.ok()) {
      // The chief's refusal, not a flag of this worker's: exit 1.
      (void)psc::daemon::ReportFailure(kProgram, refused);
      return psc::daemon::kExitFailure;
    }
  }
  if (rc != 0) return rc;
  return chief_exit != 0 ? chief_exit : drain_exit;
}
