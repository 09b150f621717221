#include "common/daemon/daemon.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/internal/program_name.h"
#include "absl/flags/internal/usage.h"
#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/base/build_info.h"
#include "common/base/logging.h"
#include "common/base/malloc_tuning.h"
#include "common/base/status_macros.h"
#include "common/daemon/daemon_flags.h"
#include "common/daemon/flag_check.h"
#include "common/rpc/server.h"

namespace psc {
namespace daemon {
namespace {

// --help lists the flags defined in pscluster's sources, not Abseil's own.
bool IsOurFlagFile(absl::string_view file) {
  return !absl::StrContains(file, "absl/") && !absl::StrContains(file, "/usr/include");
}

// --bind: "host", "host:port", "[v6]", "[v6]:port" or a bare IPv6 literal.
absl::StatusOr<cluster::HostPort> ApplyBind(const std::string& bind, const cluster::HostPort& own) {
  if (bind.empty()) return own;
  auto full = cluster::ParseHostPort(bind);
  if (full.ok()) return full;
  auto host = cluster::ParseHost(bind);
  if (host.ok()) return cluster::HostPort{*std::move(host), own.port};
  return absl::InvalidArgumentError(absl::StrCat("--bind=", bind, ": ", host.status().message()));
}

}  // namespace

std::vector<char*> InitDaemon(absl::string_view usage, int argc, char** argv,
                              bool (*help_files)(absl::string_view file)) {
  base::BlockTerminationSignals();
  base::IgnoreBrokenPipes();  // a lost collective peer must not kill a worker
  base::KeepLargeBuffersOnTheHeap();
  absl::FlagsUsageConfig config;
  config.contains_helpshort_flags = help_files != nullptr ? help_files : IsOurFlagFile;
  config.contains_help_flags = config.contains_helpshort_flags;
  config.version_string = [] { return base::VersionString() + "\n"; };
  absl::SetFlagsUsageConfig(config);
  absl::SetProgramUsageMessage(usage);
  const std::vector<std::string> args(argv + std::min(argc, 1), argv + argc);
  if (const std::optional<std::string> help = HelpFlag(args)) {
    // Abseil prints the same and exits 1; asking for help is no failure.
    // The usage starts with the program's name, which parsing would set.
    if (argc > 0) absl::flags_internal::SetProgramInvocationName(argv[0]);
    absl::flags_internal::DeduceUsageFlags(*help, "");
    absl::flags_internal::HandleUsageFlags(std::cout, absl::ProgramUsageMessage());
    std::cout.flush();
    std::exit(0);
  }
  // Abseil's own flags, which its registry does not list.
  std::vector<std::string> known = {"help",     "helpfull",  "helpshort",  "helppackage",
                                    "helpon",   "helpmatch", "version",    "only_check_args",
                                    "flagfile", "fromenv",   "tryfromenv", "undefok"};
  for (const auto& [name, flag] : absl::GetAllFlags()) known.emplace_back(name);
  if (const std::optional<std::string> unknown = UnknownFlag(args, known)) {
    const std::string program =
        argc > 0 ? std::filesystem::path(argv[0]).filename().string() : "pscluster";
    std::fprintf(stderr, "%s: %s\n", program.c_str(), unknown->c_str());
    std::exit(kExitConfigError);
  }
  return absl::ParseCommandLine(argc, argv);
}

absl::StatusOr<cluster::ClusterConfig> LoadClusterConfigFromFlags(
    absl::string_view program, std::initializer_list<cluster::TaskType> roles) {
  PSC_ASSIGN_OR_RETURN(auto text, cluster::ReadTfConfigText(absl::GetFlag(FLAGS_tf_config),
                                                            std::getenv("TF_CONFIG")));
  PSC_ASSIGN_OR_RETURN(auto cluster, cluster::ClusterConfig::Parse(text));
  for (cluster::TaskType role : roles) {
    if (cluster.task_type() == role) return cluster;
  }
  std::vector<std::string> names;
  for (cluster::TaskType role : roles)
    names.push_back(absl::StrCat("\"", cluster::TaskTypeName(role), "\""));
  return absl::InvalidArgumentError(
      absl::StrCat("TF_CONFIG: task.type is \"", cluster::TaskTypeName(cluster.task_type()),
                   "\" but ", program, " runs ", absl::StrJoin(names, " or "), " tasks"));
}

absl::StatusOr<DaemonContext> LoadDaemonContext(cluster::ClusterConfig cluster) {
  PSC_ASSIGN_OR_RETURN(
      auto security,
      rpc::LoadSecurityOptions(absl::GetFlag(FLAGS_auth_token_file), absl::GetFlag(FLAGS_tls_cert),
                               absl::GetFlag(FLAGS_tls_key), absl::GetFlag(FLAGS_tls_ca)));
  PSC_ASSIGN_OR_RETURN(auto listen, ApplyBind(absl::GetFlag(FLAGS_bind), cluster.self().address));
  PSC_RETURN_IF_ERROR(
      rpc::CheckListenAllowed(listen.host, security, absl::GetFlag(FLAGS_allow_insecure)));
  if (absl::GetFlag(FLAGS_shutdown_grace) < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--shutdown_grace must not be negative");
  }
  return DaemonContext{std::move(cluster), std::move(security), std::move(listen)};
}

DaemonStart PrepareDaemon(absl::string_view program, cluster::TaskType role,
                          cluster::ClusterConfig::Layout layout) {
  DaemonStart start;
  auto cluster = LoadClusterConfigFromFlags(program, {role});
  if (!cluster.ok()) {
    start.exit_code = ReportFailure(program, cluster.status());
    return start;
  }
  if (absl::GetFlag(FLAGS_dry_run)) {
    std::printf("%s\n", cluster->DryRunJson().c_str());
    start.exit_code = 0;
    return start;
  }
  if (absl::Status s = cluster->ValidateForTraining(layout); !s.ok()) {
    start.exit_code = ReportFailure(program, s);
    return start;
  }
  auto context = LoadDaemonContext(*std::move(cluster));
  if (!context.ok()) {
    start.exit_code = ReportFailure(program, context.status());
    return start;
  }
  start.context = *std::move(context);
  return start;
}

std::string ShutdownRpcReason(const std::string& peer, const std::string& reason) {
  return absl::StrCat("Shutdown RPC from ", peer, reason.empty() ? "" : ": ", reason);
}

int ReportFailure(absl::string_view program, const absl::Status& status) {
  std::string line = absl::StrCat(program, ": ", status.message(), "\n");
  std::fputs(line.c_str(), stderr);
  std::fflush(stderr);
  return status.code() == absl::StatusCode::kInvalidArgument ? kExitConfigError : kExitFailure;
}

int ServeUntilShutdown(absl::string_view program, const DaemonContext& context,
                       const std::vector<grpc::Service*>& services, base::ShutdownSignal* shutdown,
                       const std::function<void()>& before_stop) {
  rpc::ServerOptions options{context.listen, context.security};
  auto server = rpc::GrpcServer::Start(options, services);
  if (!server.ok()) return ReportFailure(program, server.status());
  base::Logf("%s: %s serving on %s (%s%s)", program, context.cluster.self().Name(),
             (*server)->address(), context.security.tls ? "TLS" : "plaintext",
             context.security.token.empty() ? ", no token" : ", token required");
  const std::string reason = shutdown->Wait();
  base::Logf("%s: shutting down (%s)", program, reason);
  if (before_stop) before_stop();
  (*server)->Shutdown(absl::GetFlag(FLAGS_shutdown_grace));
  base::Logf("%s: stopped", program);
  return 0;
}

}  // namespace daemon
}  // namespace psc
