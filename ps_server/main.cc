// ps_server: holds a shard of the model's variables and applies gradients.
#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "common/base/logging.h"
#include "common/daemon/daemon.h"
#include "common/daemon/daemon_flags.h"
#include "common/daemon/daemon_metrics.h"
#include "common/rpc/server.h"
#include "ps_server/data_handler.h"
#include "ps_server/ps_service.h"
#include "ps_server/shard_metrics.h"
#include "ps_server/shard_server.h"

ABSL_FLAG(int, max_request_mb, 512,
          "Pushes carrying more gradient bytes than this are refused (INVALID_ARGUMENT).");
ABSL_FLAG(int, keep_checkpoints, 5, "How many of this shard's newest checkpoints to keep.");
ABSL_FLAG(int, data_port, 0,
          "Port of the data channel (same host as the server); 0 = any free port, announced "
          "through OpenDataChannel.");
ABSL_FLAG(absl::Duration, max_pull_wait, absl::Minutes(10),
          "Longest a pull may wait for a version when the call itself has no deadline.");

int main(int argc, char** argv) {
  constexpr char kProgram[] = "ps_server";
  psc::daemon::InitDaemon(
      "a pscluster parameter server (one \"ps\" task of TF_CONFIG).\n"
      "Usage: TF_CONFIG='{...}' ps_server [flags]   or   ps_server --tf_config=@file [flags]",
      argc, argv);
  const int max_request_mb = absl::GetFlag(FLAGS_max_request_mb);
  const int keep = absl::GetFlag(FLAGS_keep_checkpoints);
  const absl::Duration max_pull_wait = absl::GetFlag(FLAGS_max_pull_wait);
  if (max_request_mb < 1 || max_request_mb > 1024) {
    return psc::daemon::ReportFailure(
        kProgram, absl::InvalidArgumentError("--max_request_mb must be in [1, 1024]"));
  }
  if (keep < 1) {
    return psc::daemon::ReportFailure(
        kProgram, absl::InvalidArgumentError("--keep_checkpoints must be at least 1"));
  }
  const int data_port = absl::GetFlag(FLAGS_data_port);
  if (data_port < 0 || data_port > 65535) {
    return psc::daemon::ReportFailure(
        kProgram, absl::InvalidArgumentError("--data_port must be in [0, 65535]"));
  }
  if (max_pull_wait <= absl::ZeroDuration()) {
    return psc::daemon::ReportFailure(
        kProgram, absl::InvalidArgumentError("--max_pull_wait must be positive"));
  }
  psc::daemon::DaemonStart start =
      psc::daemon::PrepareDaemon(kProgram, psc::cluster::TaskType::kPs);
  if (!start.context) return start.exit_code;
  const psc::daemon::DaemonContext& context = *start.context;

  psc::base::RealClock clock;
  psc::ps_server::ShardServerOptions options;
  options.task_index = context.cluster.task_index();
  options.shard.clock = &clock;
  options.shard.max_request_bytes = int64_t{max_request_mb} << 20;
  options.shard.keep_checkpoints = keep;
  options.max_pull_wait = max_pull_wait;
  psc::ps_server::ShardServer server(options);
  auto metrics = psc::daemon::StartMetricsFromFlags(kProgram, context.listen.host, "ps", [&server] {
    return psc::ps_server::ShardMetricFamilies(server.Stats());
  });
  if (!metrics.ok()) return psc::daemon::ReportFailure(kProgram, metrics.status());
  psc::base::ShutdownSignal shutdown;
  psc::ps_server::ParameterServerService service(&server, context.security.token, &shutdown);
  // The data channel, in TLS under --tls_* (the same certificates).
  psc::ps_server::ShardDataHandler data_handler(&server);
  std::unique_ptr<psc::data_channel::DataServer> data_server;
  if (absl::GetFlag(FLAGS_data_channel)) {
    psc::data_channel::DataServerOptions data_options;
    if (context.security.tls) {
      auto tls = psc::data_channel::TlsConfig::Create(
          context.security.tls_cert_pem, context.security.tls_key_pem, context.security.tls_ca_pem);
      if (!tls.ok()) return psc::daemon::ReportFailure(kProgram, tls.status());
      data_options.tls = *std::move(tls);
    }
    data_options.host = context.listen.host;
    data_options.port = data_port;
    data_options.max_request_bytes = static_cast<uint64_t>(max_request_mb) << 20;
    data_options.max_wait = max_pull_wait;
    auto started = psc::data_channel::DataServer::Start(data_options, &data_handler);
    if (!started.ok()) return psc::daemon::ReportFailure(kProgram, started.status());
    data_server = *std::move(started);
    service.set_data_server(data_server.get());
    psc::base::Logf("%s: data channel on %s (%s)", kProgram,
                    psc::cluster::HostPort{context.listen.host, data_server->port()}.ToString(),
                    data_server->tls() ? "TLS" : "plaintext");
  }
  const int rc = psc::daemon::ServeUntilShutdown(
      kProgram, context, {&service}, &shutdown, [&server, &data_server] {
        psc::ps_server::StopServing(&server, data_server.get(),
                                    absl::GetFlag(FLAGS_shutdown_grace));
      });
  // What this shard took and did, for the operator (and the tests that
  // check that a stop left no push half-counted).
  const psc::proto::ShardStats stats = server.Stats();
  psc::base::Logf(
      "%s: final counters: %d pushes accepted, %d gradients applied, %d dropped stale, %d "
      "discarded, %d pending, %d duplicates, %d rejected; version %d",
      kProgram, stats.pushes_accepted(), stats.gradients_applied(), stats.gradients_dropped_stale(),
      stats.gradients_discarded(), stats.gradients_pending(), stats.pushes_duplicate(),
      stats.requests_rejected(), stats.version());
  return rc;
}
