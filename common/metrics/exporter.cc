#include "common/metrics/exporter.h"

#include <fcntl.h>
#include <microhttpd.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <sstream>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/base/logging.h"
#include "common/metrics/families.h"
#include "common/metrics/process_metrics.h"
#include "prometheus/text_serializer.h"

namespace psc {
namespace metrics {
namespace {

// A listening TCP socket on host:port (port 0: any free one), non-blocking,
// and the port it got. UNAVAILABLE with the OS's reason.
absl::StatusOr<std::pair<int, int>> Listen(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  if (int rc = getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &found);
      rc != 0) {
    return absl::UnavailableError(absl::StrCat(host, ": ", gai_strerror(rc)));
  }
  absl::Cleanup free_found = [found] { freeaddrinfo(found); };
  std::string why = "no address";
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    const int fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      why = absl::StrCat(std::strerror(errno), " (errno ", errno, ")");
      continue;
    }
    const int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, a->ai_addr, a->ai_addrlen) != 0 || listen(fd, 128) != 0) {
      why = absl::StrCat(std::strerror(errno), " (errno ", errno, ")");
      close(fd);
      continue;
    }
    sockaddr_storage bound{};
    socklen_t len = sizeof(bound);
    getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len);
    const int got = bound.ss_family == AF_INET6
                        ? ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port)
                        : ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
    return std::make_pair(fd, got);
  }
  return absl::UnavailableError(why);
}

int ConnectionFd(MHD_Connection* connection) {
  const MHD_ConnectionInfo* info =
      MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
  return info == nullptr ? -1 : info->connect_fd;
}

int kRequestSeen;  // the per-request context's marker: its head has arrived

}  // namespace

Route RouteRequest(const std::string& method, const std::string& path) {
  if (path != "/metrics") return Route{404, "text/plain", "try /metrics\n"};
  if (method != "GET" && method != "HEAD") return Route{405, "text/plain", "GET only\n"};
  return Route{};
}

// libmicrohttpd calls these on its thread.
struct MhdCallbacks {
  static void Notify(void* cls, MHD_Connection* connection, void** socket_context,
                     MHD_ConnectionNotificationCode code) {
    auto* e = static_cast<Exporter*>(cls);
    const int fd = ConnectionFd(connection);
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
      e->table_.Started(fd, absl::Now());
    } else {
      e->table_.Closed(fd);  // before libmicrohttpd closes fd
    }
  }

  static void Completed(void* cls, MHD_Connection* connection, void** request_context,
                        MHD_RequestTerminationCode code) {
    static_cast<Exporter*>(cls)->table_.RequestEnded(ConnectionFd(connection), absl::Now());
  }

  static MHD_Result Answer(void* cls, MHD_Connection* connection, const char* url,
                           const char* method, const char* version, const char* upload_data,
                           size_t* upload_data_size, void** request_context) {
    auto* e = static_cast<Exporter*>(cls);
    if (*request_context == nullptr) {  // the head is complete
      *request_context = &kRequestSeen;
      e->table_.RequestBegan(ConnectionFd(connection));
    }
    if (*upload_data_size != 0) {  // a body (not ours to read): dropped
      *upload_data_size = 0;
      return MHD_YES;
    }
    const Route route = RouteRequest(method, url);
    const std::string body = route.status == 200 ? e->Page() : route.body;
    MHD_Response* response = MHD_create_response_from_buffer(
        body.size(), const_cast<char*>(body.data()), MHD_RESPMEM_MUST_COPY);
    if (response == nullptr) return MHD_NO;  // out of memory: the connection is closed
    MHD_add_response_header(response, MHD_HTTP_HEADER_CONTENT_TYPE, route.content_type);
    const MHD_Result queued = MHD_queue_response(connection, route.status, response);
    MHD_destroy_response(response);
    return queued;
  }
};

absl::StatusOr<std::unique_ptr<Exporter>> Exporter::Start(const std::string& host, int port,
                                                          const std::string& role, Source source) {
  auto listening = Listen(host, port);
  if (!listening.ok()) return listening.status();  // UNAVAILABLE: the OS's reason
  std::unique_ptr<Exporter> e(
      new Exporter(role, std::move(source), listening->first, listening->second));
  if (pipe2(e->wake_, O_CLOEXEC) != 0) {
    return absl::InternalError(absl::StrCat("metrics: pipe: ", std::strerror(errno)));
  }
  // Connections come from AcceptLoop (MHD_add_connection): no listening
  // socket of libmicrohttpd's own. Its connection limit is a backstop above
  // the table's (which counts a connection until just before libmicrohttpd
  // stops counting it); its inactivity timeout, twice the head deadline so
  // that the deadline alone rules the wait for a head, closes a connection
  // idle while its answer is written.
  e->daemon_ = MHD_start_daemon(
      MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_NO_LISTEN_SOCKET, 0, nullptr,
      nullptr, &MhdCallbacks::Answer, e.get(), MHD_OPTION_CONNECTION_LIMIT,
      static_cast<unsigned int>(kMaxConnections + 16), MHD_OPTION_CONNECTION_TIMEOUT,
      static_cast<unsigned int>(absl::ToInt64Seconds(2 * kHeadTimeout)),
      MHD_OPTION_CONNECTION_MEMORY_LIMIT, kMaxHeadBytes, MHD_OPTION_NOTIFY_CONNECTION,
      &MhdCallbacks::Notify, e.get(), MHD_OPTION_NOTIFY_COMPLETED, &MhdCallbacks::Completed,
      e.get(), MHD_OPTION_END);
  if (e->daemon_ == nullptr) {
    return absl::InternalError("metrics: libmicrohttpd did not start (MHD_start_daemon)");
  }
  e->acceptor_ = std::thread([p = e.get()] { p->AcceptLoop(); });
  return e;
}

Exporter::Exporter(std::string role, Source source, int listen_fd, int port)
    : role_(std::move(role)), source_(std::move(source)), listen_fd_(listen_fd), port_(port) {}

Exporter::~Exporter() {
  if (acceptor_.joinable()) {
    const char stop = 's';
    (void)!write(wake_[1], &stop, 1);
    acceptor_.join();
  }
  if (daemon_ != nullptr) MHD_stop_daemon(daemon_);  // closes every connection
  for (int fd : {listen_fd_, wake_[0], wake_[1]}) {
    if (fd >= 0) close(fd);
  }
}

std::string Exporter::Page() const {
  std::vector<prometheus::MetricFamily> families = source_();
  for (prometheus::MetricFamily& f : ProcessFamilies()) families.push_back(std::move(f));
  families.push_back(BuildInfoFamily(role_));
  families.push_back(Counter("pscluster_metrics_connections_refused_total",
                             "Connections to this endpoint closed at once: too many were open.",
                             static_cast<double>(table_.refused())));
  families.push_back(Counter("pscluster_metrics_connections_overdue_total",
                             "Connections to this endpoint closed: no request head in time.",
                             static_cast<double>(table_.overdue())));
  std::ostringstream text;
  prometheus::TextSerializer().Serialize(text, families);
  return text.str();
}

void Exporter::AcceptLoop() {
  for (;;) {
    const absl::Time now = absl::Now();
    table_.ForEachOverdue(now, [](int fd) { shutdown(fd, SHUT_RDWR); });
    // Until the next head deadline, at most a second.
    const absl::Duration wait =
        std::clamp(table_.NextDeadline() - now, absl::ZeroDuration(), absl::Seconds(1));
    pollfd p[2] = {{listen_fd_, POLLIN, 0}, {wake_[0], POLLIN, 0}};
    const int ready = poll(
        p, 2, static_cast<int>(absl::ToInt64Milliseconds(absl::Ceil(wait, absl::Milliseconds(1)))));
    if (ready < 0 && errno != EINTR) {
      base::Logf("metrics: poll: %s; no longer serving", std::strerror(errno));
      return;
    }
    if (p[1].revents != 0) return;  // stopped
    if ((p[0].revents & POLLIN) == 0) continue;
    for (int i = 0; i < kMaxConnections + 16; ++i) {  // what the backlog holds, in turns
      sockaddr_storage addr{};
      socklen_t len = sizeof(addr);
      const int fd = accept4(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len,
                             SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) break;  // EAGAIN: none left; anything else: the next poll says
      if (!table_.Admit()) {
        close(fd);  // past the limit: closed at once, unread
        continue;
      }
      if (MHD_add_connection(daemon_, fd, reinterpret_cast<sockaddr*>(&addr), len) != MHD_YES) {
        table_.Abandon();  // libmicrohttpd closed it
      }
    }
  }
}

}  // namespace metrics
}  // namespace psc
