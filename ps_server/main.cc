// ps_server: holds shards of the model's variables and applies gradients.
#include <cstdio>

#include "absl/flags/flag.h"
#include "common/daemon_flags.h"
#include "common/rpc/daemon.h"
#include "ps_server/ps_service.h"

int main(int argc, char** argv) {
  constexpr char kProgram[] = "ps_server";
  psc::InitDaemon(
      "ps_server: a pscluster parameter server (one \"ps\" task of TF_CONFIG).\n"
      "Usage: TF_CONFIG='{...}' ps_server [flags]   or   ps_server --tf_config=@file [flags]",
      argc, argv);
  auto cluster = psc::LoadClusterConfigFromFlags(kProgram, {psc::TaskType::kPs});
  if (!cluster.ok()) return psc::ReportFailure(kProgram, cluster.status());
  if (absl::GetFlag(FLAGS_dry_run)) {
    std::printf("%s\n", cluster->DryRunJson().c_str());
    return 0;
  }
  if (absl::Status s = cluster->ValidateForTraining(); !s.ok()) {
    return psc::ReportFailure(kProgram, s);
  }
  auto context = psc::LoadDaemonContext(*std::move(cluster));
  if (!context.ok()) return psc::ReportFailure(kProgram, context.status());
  psc::ShutdownSignal shutdown;
  psc::ps::ParameterServerService service(context->cluster.task_index(), context->security.token,
                                          &shutdown);
  return psc::ServeUntilShutdown(kProgram, *context, {&service}, &shutdown);
}
