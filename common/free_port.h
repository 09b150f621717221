// Free TCP ports on 127.0.0.1, for the local launcher and tests.
#ifndef PSC_COMMON_FREE_PORT_H_
#define PSC_COMMON_FREE_PORT_H_

#include <vector>

#include "absl/status/statusor.h"

namespace psc {

// A port the kernel handed out for 127.0.0.1 a moment ago (bound to port 0,
// then closed). Another process may take it before the caller binds it.
absl::StatusOr<int> PickFreeLoopbackPort();

// `n` distinct such ports: all n sockets are bound before any is closed, so
// the kernel cannot hand out one port twice.
absl::StatusOr<std::vector<int>> PickFreeLoopbackPorts(int n);

}  // namespace psc

#endif  // PSC_COMMON_FREE_PORT_H_
