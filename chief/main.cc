// chief: coordinates the cluster. For now it finds the cluster: it waits for
// every ps and worker to answer, then exits 0 (the training job comes with
// the end-to-end issue). --check_cluster only checks and changes nothing.
#include <cstdio>
#include <thread>

#include "absl/flags/flag.h"
#include "chief/cluster_waiter.h"
#include "chief/coordinator_service.h"
#include "chief/grpc_task_prober.h"
#include "chief/task_registry.h"
#include "common/daemon_flags.h"
#include "common/logging.h"
#include "common/rpc/daemon.h"
#include "common/rpc/server.h"

ABSL_FLAG(bool, check_cluster, false,
          "Wait for every ps and worker task (up to --startup_timeout), print which answer, "
          "and exit: 0 if all do, 1 naming the missing ones. Starts no server; changes nothing.");
ABSL_FLAG(absl::Duration, startup_timeout, absl::Seconds(60),
          "How long to wait for the cluster's tasks to answer, e.g. 30s or 2m.");

namespace {

constexpr char kProgram[] = "chief";

// Waits for the cluster on a helper thread while the main thread watches
// SIGTERM/SIGINT, which cancel the wait.
psc::chief::ClusterWaitResult WaitForClusterOrSignal(const psc::ClusterConfig& cluster,
                                                     const psc::SecurityOptions& security) {
  psc::ShutdownSignal done;
  psc::chief::GrpcTaskProber prober(security);
  psc::RealClock clock;
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
  if (result.cancelled) psc::Logf("%s: %s", kProgram, reason);
  return result;
}

}  // namespace

int main(int argc, char** argv) {
  psc::InitDaemon(
      "the pscluster coordinator (the \"chief\" task of TF_CONFIG).\n"
      "Usage: TF_CONFIG='{...}' chief [flags]   or   chief --tf_config=@file --check_cluster",
      argc, argv);
  const absl::Duration timeout = absl::GetFlag(FLAGS_startup_timeout);
  if (timeout < absl::ZeroDuration()) {
    return psc::ReportFailure(kProgram,
                              absl::InvalidArgumentError("--startup_timeout must not be negative"));
  }
  psc::DaemonStart start = psc::PrepareDaemon(kProgram, psc::TaskType::kChief);
  if (!start.context) return start.exit_code;
  const psc::DaemonContext& context = *start.context;

  if (absl::GetFlag(FLAGS_check_cluster)) {
    psc::chief::ClusterWaitResult result =
        WaitForClusterOrSignal(context.cluster, context.security);
    std::printf("%s", result.Table().c_str());
    std::fflush(stdout);
    absl::Status s = result.ToStatus(timeout);
    if (!s.ok()) return psc::ReportFailure(kProgram, s);
    std::printf("cluster ready: %zu tasks answer\n", result.tasks.size());
    return 0;
  }

  // Serve the Coordinator while finding the cluster.
  psc::RealClock clock;
  psc::chief::TaskRegistry registry(&context.cluster, &clock);
  psc::chief::CoordinatorService coordinator(&registry, context.security.token);
  auto server = psc::GrpcServer::Start({context.listen, context.security}, {&coordinator});
  if (!server.ok()) return psc::ReportFailure(kProgram, server.status());
  psc::Logf("%s: serving on %s; waiting up to %s for %d tasks", kProgram, (*server)->address(),
            absl::FormatDuration(timeout), psc::chief::TasksToWaitFor(context.cluster).size());
  psc::chief::ClusterWaitResult result = WaitForClusterOrSignal(context.cluster, context.security);
  std::printf("%s", result.Table().c_str());
  std::fflush(stdout);
  (*server)->Shutdown(absl::GetFlag(FLAGS_shutdown_grace));
  absl::Status s = result.ToStatus(timeout);
  if (!s.ok()) return psc::ReportFailure(kProgram, s);
  psc::Logf("%s: cluster ready: %d tasks answer in %s", kProgram, result.tasks.size(),
            absl::FormatDuration(absl::Trunc(result.elapsed, absl::Milliseconds(1))));
  return 0;
}
