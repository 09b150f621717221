#include "launcher/free_port.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"

namespace psc {
namespace launcher {

namespace {

// Closes its descriptors, in reverse order of Add.
class Fds {
 public:
  ~Fds() {
    for (auto it = fds_.rbegin(); it != fds_.rend(); ++it) close(*it);
  }
  int Add(int fd) {
    if (fd >= 0) fds_.push_back(fd);
    return fd;
  }

 private:
  std::vector<int> fds_;
};

absl::Status Failed(const char* what) {
  return absl::InternalError(
      absl::StrCat("cannot reserve a free port on 127.0.0.1: ", what, ": ", std::strerror(errno)));
}

// Binds 127.0.0.1:0, makes one connection to it and closes the accepted end
// first, so that the port is left in TIME_WAIT (see free_port.h).
absl::StatusOr<int> ReserveEphemeral() {
  Fds fds;  // closed last-added first: the accepted end, the client, the listener
  const int listener = fds.Add(socket(AF_INET, SOCK_STREAM, 0));
  if (listener < 0) return Failed("socket");
  const int one = 1;
  setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) return Failed("bind");
  if (getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    return Failed("getsockname");
  }
  if (listen(listener, 1) != 0) return Failed("listen");
  const int client = fds.Add(socket(AF_INET, SOCK_STREAM, 0));
  if (client < 0) return Failed("socket");
  if (connect(client, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    return Failed("connect");
  }
  if (fds.Add(accept(listener, nullptr, nullptr)) < 0) return Failed("accept");
  return static_cast<int>(ntohs(addr.sin_port));
}

}  // namespace

absl::StatusOr<int> PickFreeLoopbackPort() { return ReserveEphemeral(); }

absl::StatusOr<std::vector<int>> PickFreeLoopbackPorts(int n) {
  std::vector<int> ports;
  for (int i = 0; i < n; ++i) {
    PSC_ASSIGN_OR_RETURN(auto port, ReserveEphemeral());
    ports.push_back(port);
  }
  return ports;
}

}  // namespace launcher
}  // namespace psc
