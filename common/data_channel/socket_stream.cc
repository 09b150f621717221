#include "common/data_channel/socket_stream.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
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
#include "common/data_channel/tls.h"

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

SocketStream::~SocketStream() { Close(); }

void SocketStream::Close() {
  if (fd_ < 0) return;
  shut_down_.store(true);
  SSL_free(ssl_);
  ssl_ = nullptr;
  close(fd_);
  fd_ = -1;
}

absl::Status SocketStream::StartTls(SSL_CTX* ctx, bool server, const std::string& peer_host,
                                    absl::Time deadline) {
  ERR_clear_error();
  ssl_ = SSL_new(ctx);
  if (ssl_ == nullptr || SSL_set_fd(ssl_, fd_) != 1) {
    return absl::InternalError(absl::StrCat("data channel TLS: ", TakeOpenSslErrors()));
  }
  if (!server) {
    // The server's certificate must name the host connected to, as gRPC
    // checks the target's name.
    X509_VERIFY_PARAM* param = SSL_get0_param(ssl_);
    if (X509_VERIFY_PARAM_set1_ip_asc(param, peer_host.c_str()) != 1) {
      ERR_clear_error();  // not an IP address: a DNS name
      SSL_set_hostflags(ssl_, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
      if (SSL_set1_host(ssl_, peer_host.c_str()) != 1 ||
          SSL_set_tlsext_host_name(ssl_, peer_host.c_str()) != 1) {
        return absl::InvalidArgumentError(
            absl::StrCat("data channel TLS: bad host name \"", peer_host, "\""));
      }
    }
  }
  for (;;) {
    if (shut_down_.load()) return absl::UnavailableError("data channel: connection shut down");
    if (!SetTimeout(fd_, SO_RCVTIMEO, deadline) || !SetTimeout(fd_, SO_SNDTIMEO, deadline)) {
      return absl::DeadlineExceededError("data channel: deadline exceeded in the TLS handshake");
    }
    const int r = server ? SSL_accept(ssl_) : SSL_connect(ssl_);
    if (r == 1) return absl::OkStatus();
    bool retry = false;
    absl::Status s = TlsResult(r, "TLS handshake", deadline, &retry);
    if (!retry) {
      const long verify = SSL_get_verify_result(ssl_);
      if (verify != X509_V_OK) {
        return absl::UnavailableError(
            absl::StrCat("data channel: TLS handshake: the ", server ? "client" : "server",
                         "'s certificate: ", X509_verify_cert_error_string(verify)));
      }
      return s;
    }
  }
}

absl::Status SocketStream::TlsResult(int ret, const char* what, absl::Time deadline, bool* retry) {
  const int e = SSL_get_error(ssl_, ret);
  const int saved_errno = errno;
  *retry = false;
  if ((e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) ||
      (e == SSL_ERROR_SYSCALL && saved_errno == EINTR)) {
    ERR_clear_error();
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat("data channel: deadline exceeded in ", what));
    }
    *retry = true;  // a timeout slice (SO_RCVTIMEO) or a signal
    return absl::OkStatus();
  }
  if (e == SSL_ERROR_ZERO_RETURN) {
    return absl::UnavailableError("data channel: connection closed by the peer");
  }
  std::string why = TakeOpenSslErrors();
  if (why.empty()) {
    why = e == SSL_ERROR_SYSCALL && saved_errno != 0 ? std::strerror(saved_errno)
                                                     : "connection closed by the peer";
  }
  return absl::UnavailableError(absl::StrCat("data channel: ", what, ": ", why));
}

absl::Status SocketStream::WriteTls(const std::vector<iovec>& iov, absl::Time deadline) {
  // Small pieces (frame heads, metadata) are gathered into one record with
  // what follows; a tensor's bytes go as they are.
  constexpr size_t kGather = 16 << 10;
  std::string pending;
  auto write = [&](const char* p, size_t n) -> absl::Status {
    while (n > 0) {
      if (shut_down_.load()) return absl::UnavailableError("data channel: connection shut down");
      if (!SetTimeout(fd_, SO_SNDTIMEO, deadline)) {
        return absl::DeadlineExceededError("data channel: deadline exceeded while sending");
      }
      size_t written = 0;
      const int r = SSL_write_ex(ssl_, p, n, &written);
      if (r == 1) {
        p += written;
        n -= written;
        continue;
      }
      bool retry = false;
      PSC_RETURN_IF_ERROR(TlsResult(r, "send", deadline, &retry));
    }
    return absl::OkStatus();
  };
  for (const iovec& v : iov) {
    const char* p = static_cast<const char*>(v.iov_base);
    if (v.iov_len < kGather) {
      pending.append(p, v.iov_len);
      if (pending.size() < kGather) continue;
    } else if (!pending.empty()) {
      // The gathered head goes with the start of this piece.
      const size_t take = std::min(v.iov_len, kGather);
      pending.append(p, take);
      PSC_RETURN_IF_ERROR(write(pending.data(), pending.size()));
      pending.clear();
      PSC_RETURN_IF_ERROR(write(p + take, v.iov_len - take));
      continue;
    } else {
      PSC_RETURN_IF_ERROR(write(p, v.iov_len));
      continue;
    }
    PSC_RETURN_IF_ERROR(write(pending.data(), pending.size()));
    pending.clear();
  }
  if (!pending.empty()) PSC_RETURN_IF_ERROR(write(pending.data(), pending.size()));
  return absl::OkStatus();
}

absl::Status SocketStream::ReadTls(char* p, size_t n, absl::Time deadline) {
  size_t got = 0;
  while (got < n) {
    if (shut_down_.load()) return absl::UnavailableError("data channel: connection shut down");
    if (!SetTimeout(fd_, SO_RCVTIMEO, deadline)) {
      return absl::DeadlineExceededError("data channel: deadline exceeded while receiving");
    }
    size_t read = 0;
    const int r = SSL_read_ex(ssl_, p + got, n - got, &read);
    if (r == 1) {
      got += read;
      continue;
    }
    bool retry = false;
    PSC_RETURN_IF_ERROR(TlsResult(r, "receive", deadline, &retry));
  }
  return absl::OkStatus();
}

void SocketStream::ShutdownWrite() { ::shutdown(fd_, SHUT_WR); }

void SocketStream::ShutdownRead() { ::shutdown(fd_, SHUT_RD); }

bool SocketStream::HasInput() {
  if (fd_ < 0) return false;
  char c;
  if (ssl_ != nullptr) return SSL_pending(ssl_) > 0 || SSL_peek(ssl_, &c, 1) > 0;
  return recv(fd_, &c, 1, MSG_PEEK | MSG_DONTWAIT) > 0;
}

absl::StatusOr<bool> SocketStream::WaitReadable(int wake_fd, absl::Time deadline) {
  if (ssl_ != nullptr && SSL_pending(ssl_) > 0) return true;
  for (;;) {
    if (shut_down_.load()) return absl::UnavailableError("data channel: connection shut down");
    pollfd p[2] = {{fd_, POLLIN, 0}, {wake_fd, POLLIN, 0}};
    const int r = poll(p, wake_fd >= 0 ? 2 : 1, PollTimeoutMs(deadline));
    if (r < 0) {
      if (errno == EINTR) continue;
      return absl::UnavailableError(absl::StrCat("data channel: poll: ", std::strerror(errno)));
    }
    if (p[0].revents != 0) return true;
    if (r > 0) return false;  // woken, and nothing to read
    return absl::DeadlineExceededError("data channel: deadline exceeded while waiting");
  }
}

void SocketStream::Shutdown() {
  if (!shut_down_.exchange(true)) shutdown(fd_, SHUT_RDWR);
}

absl::Status SocketStream::WriteAll(std::vector<iovec> iov, absl::Time deadline) {
  if (ssl_ != nullptr) return WriteTls(iov, deadline);
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
  if (ssl_ != nullptr) return ReadTls(p, n, deadline);
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
