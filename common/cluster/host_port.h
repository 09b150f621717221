// Parsing and checking of "host:port" network addresses, as TF_CONFIG and
// the --bind flag write them: "name:port", "1.2.3.4:port" or "[::1]:port".
#ifndef PSC_COMMON_CLUSTER_HOST_PORT_H_
#define PSC_COMMON_CLUSTER_HOST_PORT_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace psc {
namespace cluster {

struct HostPort {
  std::string host;  // without brackets: "::1", "10.0.0.2", "worker-0.svc"
  int port = 0;      // 1..65535

  // "host:port", with brackets around an IPv6 literal.
  std::string ToString() const;
};

// Parses "host:port". Errors are INVALID_ARGUMENT with a message that says
// what is wrong ("missing port", "port 70000 out of range 1-65535", ...) and
// does not repeat the address; callers add the context.
absl::StatusOr<HostPort> ParseHostPort(absl::string_view address);

// Checks a bare host: a DNS name, an IPv4 literal or an IPv6 literal (with or
// without brackets). Returns it without brackets.
absl::StatusOr<std::string> ParseHost(absl::string_view host);

// True if every address `host` resolves to is a loopback address
// (127.0.0.0/8 or ::1). False when it does not resolve, or for a wildcard
// such as 0.0.0.0 or ::.
bool IsLoopbackHost(const std::string& host);

}  // namespace cluster
}  // namespace psc

#endif  // PSC_COMMON_CLUSTER_HOST_PORT_H_
