// Free TCP ports on 127.0.0.1, for the local launcher and tests.
//
// A port picked by binding port 0 and closing is free only for a moment: any
// process binding port 0 next (a data channel listener, another test's
// picker) may get the same one before the caller's server binds it. So each
// picked port is left reserved: one connection is made to it and closed from
// the listening side first, which leaves the port in TIME_WAIT for about a
// minute. The kernel then hands it to no bind(0) and no connect(), while a
// server binding it by number with SO_REUSEADDR (gRPC's and the data channel's
// listeners set it) gets it at once. The same trick as Yelp's
// ephemeral-port-reserve.
#ifndef PSC_LAUNCHER_FREE_PORT_H_
#define PSC_LAUNCHER_FREE_PORT_H_

#include <vector>

#include "absl/status/statusor.h"

namespace psc {
namespace launcher {

// A reserved free port on 127.0.0.1 (see above).
absl::StatusOr<int> PickFreeLoopbackPort();

// `n` distinct such ports.
absl::StatusOr<std::vector<int>> PickFreeLoopbackPorts(int n);

}  // namespace launcher
}  // namespace psc

#endif  // PSC_LAUNCHER_FREE_PORT_H_
