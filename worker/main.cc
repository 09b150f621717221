// worker: computes gradients on its devices and pushes them to the servers.
#include <cstdio>

#include "absl/flags/flag.h"
#include "common/gpu/gpu_info.h"
#include "common/rpc/daemon.h"
#include "worker/devices.h"
#include "worker/worker_service.h"

ABSL_FLAG(bool, list_devices, false,
          "Print the physical and logical devices this worker would use, then exit 0 "
          "(no TF_CONFIG needed).");

int main(int argc, char** argv) {
  constexpr char kProgram[] = "worker";
  psc::InitDaemon(
      "a pscluster worker (one \"worker\" task of TF_CONFIG).\n"
      "Usage: TF_CONFIG='{...}' worker [flags]   or   worker --tf_config=@file [flags]",
      argc, argv);
  if (absl::GetFlag(FLAGS_list_devices)) {
    std::string why;
    auto devices = psc::worker::ListDevices(0, &why);
    std::printf("%s", psc::worker::FormatDevices(devices).c_str());
    if (devices.size() == 1) std::printf("(no GPU: %s)\n", why.c_str());
    std::printf("GPU libraries: %s\n", psc::GpuLibraryVersions().c_str());
    return 0;
  }
  psc::DaemonStart start = psc::PrepareDaemon(kProgram, psc::TaskType::kWorker);
  if (!start.context) return start.exit_code;
  const psc::DaemonContext& context = *start.context;
  psc::ShutdownSignal shutdown;
  psc::worker::WorkerService service(context.cluster.task_index(),
                                     psc::worker::ListDevices(context.cluster.task_index()),
                                     context.security.token, &shutdown);
  return psc::ServeUntilShutdown(kProgram, context, {&service}, &shutdown);
}
