#include "common/data_channel/socket_stream.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/base/status_macros.h"

namespace psc {
namespace data_channel {
namespace {

void SetNonBlocking(int fd, bool on) {
  const int flags = fcntl(fd, F_GETFL, 0);
  fcntl(fd, F_SETFL, on ? (flags | O_NONBLOCK) : (flags & ~O_NONBLOCK));
}

// poll's timeout for `deadline`: -1 for never, else milliseconds rounded up.
int PollTimeoutMs(absl::Time deadline) {
  if (deadline == absl::InfiniteFuture()) return -1;
  const absl::Duration left = deadline - absl::Now();
  if (left <= absl::ZeroDuration()) return 0;
  return static_cast<int>(
      std::min<int64_t>(absl::ToInt64Milliseconds(left + absl::Microseconds(999)), INT_MAX));
}

// Sets SO_RCVTIMEO or SO_SNDTIMEO to what is left until `deadline` (0 =
// block forever). False once the deadline has passed.
bool SetTimeout(int fd, int option, absl::Time deadline) {
  timeval tv{0, 0};
  if (deadline != absl::InfiniteFuture()) {
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) return false;
    tv = absl::ToTimeval(std::max(left, absl::Microseconds(1)));
  }
  setsockopt(fd, SOL_SOCKET, option, &tv, sizeof(tv));
  return true;
}

struct FreeAddrInfo {
  void operator()(addrinfo* a) const { freeaddrinfo(a); }
};
using AddrInfoList = std::unique_ptr<addrinfo, FreeAddrInfo>;

// The TCP addresses of host:port (any family); `passive` for binding.
absl::StatusOr<AddrInfoList> Resolve(const std::string& host, int port, bool passive) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  if (passive) hints.ai_flags = AI_PASSIVE;
  addrinfo* res = nullptr;
  const std::string service = std::to_string(port);
  if (int rc = getaddrinfo(host.c_str(), service.c_str(), &hints, &res); rc != 0) {
    return absl::UnavailableError(
        absl::StrCat("data channel: cannot resolve ", host, ":", port, ": ", gai_strerror(rc)));
  }
  return AddrInfoList(res);
}

}  // namespace

SocketStream::SocketStream(int fd) : fd_(fd) {
  SetNonBlocking(fd_, false);
  int one = 1;
  setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

SocketStream::~SocketStream() { close(fd_); }

void SocketStream::ShutdownWrite() { ::shutdown(fd_, SHUT_WR); }

void SocketStream::Shutdown() {
  if (!shut_down_.exchange(true)) shutdown(fd_, SHUT_RDWR);
}

absl::Status SocketStream::WriteAll(std::vector<iovec> iov, absl::Time deadline) {
  size_t first = 0;
  while (first < iov.size()) {
    if (iov[first].iov_len == 0) {
      ++first;
      continue;
    }
    const int count = static_cast<int>(std::min<size_t>(iov.size() - first, IOV_MAX));
    msghdr msg{};
    msg.msg_iov = &iov[first];
    msg.msg_iovlen = count;
    if (shut_down_.load()) return absl::UnavailableError("data channel: connection shut down");
    if (!SetTimeout(fd_, SO_SNDTIMEO, deadline)) {
      return absl::DeadlineExceededError("data channel: deadline exceeded while sending");
    }
    const ssize_t n = sendmsg(fd_, &msg, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;  // EAGAIN: timeout
      return absl::UnavailableError(absl::StrCat("data channel: send: ", std::strerror(errno)));
    }
    size_t left = static_cast<size_t>(n);
    while (left > 0 && first < iov.size()) {
      const size_t take = std::min(left, iov[first].iov_len);
      iov[first].iov_base = static_cast<char*>(iov[first].iov_base) + take;
      iov[first].iov_len -= take;
      left -= take;
      if (iov[first].iov_len == 0) ++first;
    }
  }
  return absl::OkStatus();
}

absl::Status SocketStream::ReadExact(char* p, size_t n, absl::Time deadline) {
  // Blocking recv with MSG_WAITALL: one system call for a whole tensor
  // (the process is woken once, not per segment); SO_RCVTIMEO bounds it and
  // Shutdown() ends it.
  size_t got = 0;
  while (got < n) {
    if (shut_down_.load()) return absl::UnavailableError("data channel: connection shut down");
    if (!SetTimeout(fd_, SO_RCVTIMEO, deadline)) {
      return absl::DeadlineExceededError("data channel: deadline exceeded while receiving");
    }
    const ssize_t k = recv(fd_, p + got, n - got, MSG_WAITALL);
    if (k > 0) {
      got += static_cast<size_t>(k);
      continue;
    }
    if (k == 0) return absl::UnavailableError("data channel: connection closed by the peer");
    if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;  // EAGAIN: timeout
    return absl::UnavailableError(absl::StrCat("data channel: recv: ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<SocketStream>> ConnectTcp(const std::string& host, int port,
                                                         absl::Time deadline) {
  const std::string where = absl::StrCat(host, ":", port);
  PSC_ASSIGN_OR_RETURN(auto addresses, Resolve(host, port, /*passive=*/false));
  std::string last_error = "no address";
  for (addrinfo* a = addresses.get(); a != nullptr; a = a->ai_next) {
    int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      last_error = std::strerror(errno);
      continue;
    }
    SetNonBlocking(fd, true);  // for the connect timeout; SocketStream makes it blocking
    if (connect(fd, a->ai_addr, a->ai_addrlen) == 0) return std::make_unique<SocketStream>(fd);
    if (errno != EINPROGRESS) {
      last_error = std::strerror(errno);
      close(fd);
      continue;
    }
    pollfd p{fd, POLLOUT, 0};
    const int r = poll(&p, 1, PollTimeoutMs(deadline));
    if (r == 0) {
      close(fd);
      return absl::DeadlineExceededError(absl::StrCat("data channel: connecting to ", where));
    }
    int err = 0;
    socklen_t len = sizeof(err);
    getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
    if (r > 0 && err == 0) return std::make_unique<SocketStream>(fd);
    last_error = std::strerror(r < 0 ? errno : err);
    close(fd);
  }
  return absl::UnavailableError(
      absl::StrCat("data channel: cannot connect to ", where, ": ", last_error));
}

TcpListener::TcpListener(int fd, int port) : fd_(fd), port_(port) {
  if (pipe2(wake_, O_CLOEXEC) != 0) wake_[0] = wake_[1] = -1;
}

TcpListener::~TcpListener() {
  close(fd_);
  if (wake_[0] >= 0) close(wake_[0]);
  if (wake_[1] >= 0) close(wake_[1]);
}

absl::StatusOr<std::unique_ptr<TcpListener>> TcpListener::Listen(const std::string& host,
                                                                 int port) {
  const std::string where = absl::StrCat(host, ":", port);
  PSC_ASSIGN_OR_RETURN(auto addresses, Resolve(host, port, /*passive=*/true));
  std::string last_error = "no address";
  for (addrinfo* a = addresses.get(); a != nullptr; a = a->ai_next) {
    int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      last_error = std::strerror(errno);
      continue;
    }
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_storage bound{};
    socklen_t len = sizeof(bound);
    if (bind(fd, a->ai_addr, a->ai_addrlen) != 0 || listen(fd, 64) != 0 ||
        getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len) != 0) {
      last_error = std::strerror(errno);
      close(fd);
      continue;
    }
    const int actual = bound.ss_family == AF_INET6
                           ? ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port)
                           : ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
    SetNonBlocking(fd, true);
    return std::unique_ptr<TcpListener>(new TcpListener(fd, actual));
  }
  return absl::UnavailableError(
      absl::StrCat("data channel: cannot listen on ", where, ": ", last_error));
}

void TcpListener::Shutdown() {
  if (shut_down_.exchange(true)) return;
  if (wake_[1] >= 0) {
    char c = 1;
    (void)!write(wake_[1], &c, 1);
  }
}

absl::StatusOr<std::unique_ptr<SocketStream>> TcpListener::Accept() {
  for (;;) {
    if (shut_down_.load()) return absl::CancelledError("data channel: listener shut down");
    pollfd p[2] = {{fd_, POLLIN, 0}, {wake_[0], POLLIN, 0}};
    const int r = poll(p, wake_[0] >= 0 ? 2 : 1, wake_[0] >= 0 ? -1 : 100);
    if (r < 0 && errno != EINTR) {
      return absl::UnavailableError(absl::StrCat("data channel: poll: ", std::strerror(errno)));
    }
    if (r <= 0 || !(p[0].revents & POLLIN)) continue;
    const int fd = accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd >= 0) return std::make_unique<SocketStream>(fd);
    if (errno == EINTR || errno == EAGAIN || errno == ECONNABORTED) continue;
    if (errno == EMFILE || errno == ENFILE) {
      absl::SleepFor(absl::Milliseconds(10));  // out of descriptors: let connections close
      continue;
    }
    return absl::UnavailableError(absl::StrCat("data channel: accept: ", std::strerror(errno)));
  }
}

}  // namespace data_channel
}  // namespace psc
