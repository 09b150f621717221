// What ps_server, worker and chief share between parsing their flags and
// serving: TF_CONFIG, security, the listening address, exit codes, and the
// serve-until-shutdown loop. Each main.cc is a few lines over these.
//
// Exit codes (DESIGN.md): 0 success; 2 a configuration or flag value we
// validate (INVALID_ARGUMENT); 1 any other failure.
#ifndef PSC_COMMON_DAEMON_DAEMON_H_
#define PSC_COMMON_DAEMON_DAEMON_H_

#include <functional>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/base/shutdown.h"
#include "common/cluster/cluster_config.h"
#include "common/cluster/host_port.h"
#include "common/rpc/security.h"
#include "grpcpp/impl/codegen/service_type.h"

namespace psc {
namespace daemon {

inline constexpr int kExitConfigError = 2;
inline constexpr int kExitFailure = 1;

// Blocks SIGTERM/SIGINT (see common/base/shutdown.h), keeps large buffers on the
// heap (common/base/malloc_tuning.h), makes --help list
// pscluster's own flags (those defined in a file `help_files` accepts,
// when given: e.g. the launcher's own), and parses the command line
// (Abseil flags). Returns the positional arguments, argv[0] first.
std::vector<char*> InitDaemon(absl::string_view usage, int argc, char** argv,
                              bool (*help_files)(absl::string_view file) = nullptr);

// Reads TF_CONFIG (--tf_config, else the environment) and checks that this
// task is one of `roles`.
absl::StatusOr<cluster::ClusterConfig> LoadClusterConfigFromFlags(
    absl::string_view program, std::initializer_list<cluster::TaskType> roles);

struct DaemonContext {
  cluster::ClusterConfig cluster;
  rpc::SecurityOptions security;
  cluster::HostPort listen;  // the task's address, or --bind's host (and port)
};

// Loads --auth_token_file and TLS, applies --bind, and refuses a
// non-loopback listen address without a token unless --allow_insecure.
absl::StatusOr<DaemonContext> LoadDaemonContext(cluster::ClusterConfig cluster);

// The common start of every daemon's main: TF_CONFIG for `role`, --dry_run
// (prints and ends with exit 0), the training-cluster check, then
// LoadDaemonContext. `context` is empty when main should return `exit_code`.
struct DaemonStart {
  std::optional<DaemonContext> context;
  int exit_code = 0;
};
// `layout`: whether the cluster must have ps tasks (ValidateForTraining).
DaemonStart PrepareDaemon(
    absl::string_view program, cluster::TaskType role,
    cluster::ClusterConfig::Layout layout = cluster::ClusterConfig::Layout::kParameterServer);

// "Shutdown RPC from <peer>[: <reason>]", for ShutdownSignal::Request.
std::string ShutdownRpcReason(const std::string& peer, const std::string& reason);

// Prints "<program>: <message>" to stderr and returns the exit code for it.
int ReportFailure(absl::string_view program, const absl::Status& status);

// Serves `services` on context.listen until SIGTERM, SIGINT or
// shutdown->Request, then runs `before_stop` (e.g. to fail calls that wait
// for events that will not come) and shuts down gracefully
// (--shutdown_grace). Returns the exit code: 0 after a clean shutdown, 1 if
// the server cannot start.
int ServeUntilShutdown(absl::string_view program, const DaemonContext& context,
                       const std::vector<grpc::Service*>& services, base::ShutdownSignal* shutdown,
                       const std::function<void()>& before_stop = nullptr);

}  // namespace daemon
}  // namespace psc

#endif  // PSC_COMMON_DAEMON_DAEMON_H_
