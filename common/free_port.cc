#include "common/free_port.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace psc {

namespace {

// Binds a socket to 127.0.0.1:0; returns it open, with its port.
absl::StatusOr<std::pair<int, int>> BindEphemeral() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return absl::InternalError(absl::StrCat("socket: ", std::strerror(errno)));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    const int err = errno;
    close(fd);
    return absl::InternalError(
        absl::StrCat("cannot find a free port on 127.0.0.1: ", std::strerror(err)));
  }
  return std::make_pair(fd, static_cast<int>(ntohs(addr.sin_port)));
}

}  // namespace

absl::StatusOr<int> PickFreeLoopbackPort() {
  auto ports = PickFreeLoopbackPorts(1);
  if (!ports.ok()) return ports.status();
  return (*ports)[0];
}

absl::StatusOr<std::vector<int>> PickFreeLoopbackPorts(int n) {
  std::vector<int> fds, ports;
  absl::Status status;
  for (int i = 0; i < n; ++i) {
    auto bound = BindEphemeral();
    if (!bound.ok()) {
      status = bound.status();
      break;
    }
    fds.push_back(bound->first);
    ports.push_back(bound->second);
  }
  for (int fd : fds) close(fd);
  if (!status.ok()) return status;
  return ports;
}

}  // namespace psc
