// A started gRPC server: listening address, credentials, the standard health
// service, message limits, and graceful shutdown.
//
// Lifecycle: Start -> SERVING -> Shutdown(grace) -> STOPPED. Shutdown marks
// every service NOT_SERVING, stops accepting calls, lets in-flight calls
// finish for up to `grace`, then cancels what remains.
#ifndef PSC_COMMON_RPC_SERVER_H_
#define PSC_COMMON_RPC_SERVER_H_

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/cluster/host_port.h"
#include "common/rpc/security.h"
#include "grpcpp/server.h"

namespace psc {
namespace rpc {

struct ServerOptions {
  cluster::HostPort listen;  // port 0 picks a free port (tests)
  SecurityOptions security;
};

// Whether a TCP socket can be bound at `at` as the servers bind it
// (SO_REUSEADDR): UNAVAILABLE with the OS's reason and errno ("Address
// already in use (errno 98)") otherwise. A probe: the socket is closed.
absl::Status CheckListenable(const cluster::HostPort& at);

// Thread-safe.
class GrpcServer {
 public:
  // Binds, registers `services` (not owned; they must outlive the server)
  // and gRPC's standard health service, and starts serving. The health
  // service reports the server ("") SERVING until Shutdown.
  // UNAVAILABLE with the OS's reason when the address cannot be bound (for
  // example "Address already in use").
  static absl::StatusOr<std::unique_ptr<GrpcServer>> Start(
      const ServerOptions& options, const std::vector<grpc::Service*>& services);

  ~GrpcServer();

  // The port actually bound.
  int port() const { return port_; }
  std::string address() const;

  // Idempotent; blocks until the server has stopped.
  void Shutdown(absl::Duration grace);

 private:
  GrpcServer(std::unique_ptr<grpc::Server> server, cluster::HostPort listen, int port);

  const std::unique_ptr<grpc::Server> server_;
  const cluster::HostPort listen_;
  const int port_;
  std::once_flag shutdown_once_;
};

}  // namespace rpc
}  // namespace psc

#endif  // PSC_COMMON_RPC_SERVER_H_
