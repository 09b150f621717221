// worker: computes gradients on its devices and pushes them to the servers.
#include <cstdio>

#include "absl/flags/flag.h"
#include "common/base/logging.h"
#include "common/base/status_macros.h"
#include "common/daemon/daemon.h"
#include "common/daemon/daemon_flags.h"
#include "common/gpu/gpu_info.h"
#include "common/job/job_export.h"
#include "common/job/job_flags.h"
#include "common/job/job_model.h"
#include "common/job/job_result.h"
#include "common/job/progress.h"
#include "common/rpc/grpc_parameter_client.h"
#include "worker/device_flags.h"
#include "worker/device_plan.h"
#include "worker/devices.h"
#include "worker/grpc_coordinator_client.h"
#include "worker/heartbeat.h"
#include "worker/standalone_trainer.h"
#include "worker/worker_core.h"
#include "worker/worker_service.h"

ABSL_FLAG(bool, standalone, false,
          "Train the job alone, with no servers and no TF_CONFIG: takes the job flags "
          "(--model, --optimizer, --learning_rate, --batch_size, --epochs, --steps_per_epoch, "
          "--max_train_examples, --data_dir, --seed, --metrics_out, --intra_op_threads) and the "
          "device flags.");
ABSL_FLAG(absl::Duration, heartbeat_interval, absl::Seconds(1),
          "How often to tell the chief this worker is alive (its Coordinator service); the "
          "chief declares a worker lost after --heartbeat_timeout without one. 0 = never.");
ABSL_FLAG(bool, list_devices, false,
          "Print the physical and logical devices this worker would use, then exit 0 "
          "(no TF_CONFIG needed).");

namespace {

constexpr char kProgram[] = "worker";

// The device flags against the machine's GPUs. An error is INVALID_ARGUMENT
// (exit 2) for bad flags, FAILED_PRECONDITION (exit 1) for a GPU asked for
// and not usable.
absl::StatusOr<psc::worker::DeviceSetup> SetUpDevices(int task_index) {
  PSC_ASSIGN_OR_RETURN(auto options, psc::worker::DeviceOptionsFromFlags());
  std::string why;
  const std::vector<psc::gpu::GpuInfo> gpus = options.device == psc::worker::DeviceKind::kCpu
                                                  ? std::vector<psc::gpu::GpuInfo>{}
                                                  : psc::gpu::ListGpus(&why);
  PSC_ASSIGN_OR_RETURN(auto plan, psc::worker::PlanDevices(options, gpus, why, task_index));
  if (plan.on_gpu() || plan.devices.size() > 1) {
    psc::base::Logf("worker: %d replica(s), on %s", static_cast<int>(plan.devices.size()),
                    plan.devices[0].name);
  }
  return psc::worker::DeviceSetup{std::move(options), std::move(plan)};
}

int PrintDevices() {
  std::string why;
  const std::vector<psc::gpu::GpuInfo> gpus = psc::gpu::ListGpus(&why);
  int rc = 0;
  auto options = psc::worker::DeviceOptionsFromFlags();
  absl::StatusOr<psc::worker::DevicePlan> plan =
      options.ok() ? psc::worker::PlanDevices(*options, gpus, why, 0)
                   : absl::StatusOr<psc::worker::DevicePlan>(options.status());
  if (plan.ok()) {
    std::printf("%s", psc::worker::FormatDevicePlan(*plan, gpus, why).c_str());
  } else {
    std::printf("%s", psc::worker::FormatDevicePlan({}, gpus, why).c_str());
    rc = psc::daemon::ReportFailure(kProgram, plan.status());
  }
  std::printf("GPU libraries: %s\n", psc::gpu::GpuLibraryVersions().c_str());
  return rc;
}

int RunStandalone() {
  auto job = psc::job::JobSpecFromFlags();
  if (!job.ok()) return psc::daemon::ReportFailure(kProgram, job.status());
  auto exports = psc::job::ExportOptionsFromFlags();
  if (!exports.ok()) return psc::daemon::ReportFailure(kProgram, exports.status());
  auto devices = SetUpDevices(0);
  if (!devices.ok()) return psc::daemon::ReportFailure(kProgram, devices.status());
  psc::job::ProgressPrinter progress(stdout);
  std::vector<std::vector<float>> params;
  auto result = psc::worker::TrainStandalone(*job, &progress, &params, *devices);
  if (!result.ok()) return psc::daemon::ReportFailure(kProgram, result.status());
  auto model = psc::job::ModelForJob(*job);
  if (!model.ok()) return psc::daemon::ReportFailure(kProgram, model.status());
  if (absl::Status s =
          psc::job::ExportModel(*exports, psc::job::ModelConfigJson(*job), *model, params);
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
  psc::daemon::DaemonStart start =
      psc::daemon::PrepareDaemon(kProgram, psc::cluster::TaskType::kWorker);
  if (!start.context) return start.exit_code;
  const psc::daemon::DaemonContext& context = *start.context;
  auto devices = SetUpDevices(context.cluster.task_index());
  if (!devices.ok()) return psc::daemon::ReportFailure(kProgram, devices.status());
  psc::base::ShutdownSignal shutdown;
  std::vector<std::string> ps_addresses;
  for (const psc::cluster::TaskAddress& t : context.cluster.tasks(psc::cluster::TaskType::kPs)) {
    ps_addresses.push_back(t.address.ToString());
  }
  const int task_index = context.cluster.task_index();
  psc::rpc::GrpcParameterClient servers(ps_addresses, context.security, absl::Seconds(60),
                                        absl::GetFlag(FLAGS_data_channel));
  psc::worker::WorkerCore core(task_index, psc::worker::ListDevices(task_index), &servers,
                               *std::move(devices));
  // Heartbeats to the chief, which declares a worker lost when they stop.
  std::unique_ptr<psc::worker::GrpcCoordinatorClient> coordinator;
  std::unique_ptr<psc::worker::Heartbeat> heartbeat;
  const auto& chiefs = context.cluster.tasks(psc::cluster::TaskType::kChief);
  if (!chiefs.empty() && interval > absl::ZeroDuration()) {
    coordinator = std::make_unique<psc::worker::GrpcCoordinatorClient>(chiefs[0].address.ToString(),
                                                                       context.security);
    heartbeat = std::make_unique<psc::worker::Heartbeat>(
        coordinator.get(), task_index, psc::worker::NewIncarnation(), interval,
        [&core] { return core.CurrentProgress(); });
    heartbeat->Start();
  }
  psc::worker::WorkerService service(&core, context.security.token, &shutdown);
  return psc::daemon::ServeUntilShutdown(kProgram, context, {&service}, &shutdown,
                                         [&heartbeat, &core] {
                                           if (heartbeat) heartbeat->Stop();
                                           core.Stop();
                                         });
}
