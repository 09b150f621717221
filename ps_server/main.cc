// ps_server: holds shards of the model's variables and applies gradients.
#include "common/rpc/daemon.h"
#include "ps_server/ps_service.h"

int main(int argc, char** argv) {
  constexpr char kProgram[] = "ps_server";
  psc::InitDaemon(
      "a pscluster parameter server (one \"ps\" task of TF_CONFIG).\n"
      "Usage: TF_CONFIG='{...}' ps_server [flags]   or   ps_server --tf_config=@file [flags]",
      argc, argv);
  psc::DaemonStart start = psc::PrepareDaemon(kProgram, psc::TaskType::kPs);
  if (!start.context) return start.exit_code;
  const psc::DaemonContext& context = *start.context;
  psc::ShutdownSignal shutdown;
  psc::ps::ParameterServerService service(context.cluster.task_index(), context.security.token,
                                          &shutdown);
  return psc::ServeUntilShutdown(kProgram, context, {&service}, &shutdown);
}
