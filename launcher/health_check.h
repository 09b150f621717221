// `pscluster health HOST:PORT`: one call to a daemon's standard gRPC health
// service (grpc.health.v1.Health/Check), the probe docker-compose's
// healthchecks run inside the image (Kubernetes has its own grpc: probe).
#ifndef PSC_LAUNCHER_HEALTH_CHECK_H_
#define PSC_LAUNCHER_HEALTH_CHECK_H_

#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/rpc/security.h"

namespace psc {
namespace launcher {

// OK when the daemon at `address` answers SERVING within `timeout`;
// UNAVAILABLE naming the address otherwise (no connection, or NOT_SERVING
// while it shuts down); INVALID_ARGUMENT for an address that is not
// host:port.
absl::Status CheckHealth(const std::string& address, const rpc::SecurityOptions& security,
                         absl::Duration timeout);

}  // namespace launcher
}  // namespace psc

#endif  // PSC_LAUNCHER_HEALTH_CHECK_H_
