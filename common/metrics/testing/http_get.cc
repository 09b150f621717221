#include "common/metrics/testing/http_get.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace psc {
namespace metrics {
namespace {

int Connect(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  timeval tv{10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

bool SendAll(int fd, const std::string& bytes) {
  size_t sent = 0;
  while (sent < bytes.size()) {
    const ssize_t n = send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) return false;
    sent += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

std::string HttpGet(int port, const std::string& path) {
  return HttpRequest(port, absl::StrCat("GET ", path, " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n"));
}

std::string HttpRequest(int port, const std::string& req) {
  const int fd = Connect(port);
  if (fd < 0) return "";
  std::string out;
  if (SendAll(fd, req)) {
    char buf[4096];
    for (int i = 0; i < 10000; ++i) {  // bounded: 40 MB at most
      const ssize_t n = read(fd, buf, sizeof(buf));
      if (n <= 0) break;
      out.append(buf, n);
    }
  }
  close(fd);
  return out;
}

TestConnection TestConnection::Open(int port) { return TestConnection(Connect(port)); }

TestConnection::~TestConnection() {
  if (fd_ >= 0) close(fd_);
}

bool TestConnection::Send(const std::string& bytes) { return fd_ >= 0 && SendAll(fd_, bytes); }

bool TestConnection::ClosedWithin(absl::Duration wait) {
  if (fd_ < 0) return true;
  const absl::Time deadline = absl::Now() + wait;
  for (int i = 0; i < 100000; ++i) {  // bounded: each turn reads bytes or waits
    const int64_t ms = std::max<int64_t>(0, absl::ToInt64Milliseconds(deadline - absl::Now()));
    pollfd p{fd_, POLLIN, 0};
    const int ready = poll(&p, 1, static_cast<int>(ms));
    if (ready <= 0) return false;  // nothing within the wait
    char buf[4096];
    const ssize_t n = recv(fd_, buf, sizeof(buf), MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) return true;
  }
  return false;
}

}  // namespace metrics
}  // namespace psc
