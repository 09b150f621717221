// GET /metrics over HTTP: what a role's source answers at each scrape, then
// the process_* metrics and pscluster_build_info (process_metrics.h), in
// Prometheus' text format (prometheus-cpp's TextSerializer).
//
// HTTP is libmicrohttpd's (Debian's libmicrohttpd12): one event-driven thread
// (epoll) serves every connection at once, so a slow or idle client never
// delays a scrape. Connections are accepted by the exporter's own thread,
// which enforces two rules (connection_table.h) and hands the rest to
// libmicrohttpd:
//   - at most kMaxConnections are open; one more is closed at once, unread;
//   - a request head must arrive within kHeadTimeout of the connection's
//     opening (or of the previous answer on a kept-alive connection), however
//     slowly its bytes trickle; past it the connection is closed.
// A head larger than kMaxHeadBytes is answered 431 by libmicrohttpd (its
// per-connection memory), and a connection idle for twice kHeadTimeout while
// an answer is being written is closed too. So the exporter holds at most
// kMaxConnections x kMaxHeadBytes of requests and 2 threads whatever its
// clients do.
#ifndef PSC_COMMON_METRICS_EXPORTER_H_
#define PSC_COMMON_METRICS_EXPORTER_H_

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/metrics/connection_table.h"
#include "prometheus/metric_family.h"

struct MHD_Daemon;

namespace psc {
namespace metrics {

// What the endpoint answers a request (transport-free, for tests): 200 with
// the page for GET or HEAD of /metrics (libmicrohttpd has removed any query
// string), 404 for another path, 405 for another method on /metrics.
struct Route {
  int status = 200;
  const char* content_type = "text/plain; version=0.0.4; charset=utf-8";
  std::string body;  // when not 200
};
Route RouteRequest(const std::string& method, const std::string& path);

// Thread-safe.
class Exporter {
 public:
  // The role's own families, read at each scrape (on the exporter's thread).
  using Source = std::function<std::vector<prometheus::MetricFamily>()>;

  static constexpr int kMaxConnections = 64;
  static constexpr absl::Duration kHeadTimeout = absl::Seconds(5);
  static constexpr size_t kMaxHeadBytes = 16 << 10;

  // Serves on `host`:`port` (port 0 picks one). `source` must be
  // thread-safe and outlive the exporter. UNAVAILABLE with the OS's reason
  // when the address cannot be listened on; INTERNAL if libmicrohttpd
  // cannot start.
  static absl::StatusOr<std::unique_ptr<Exporter>> Start(const std::string& host, int port,
                                                         const std::string& role, Source source);
  ~Exporter();  // stops serving; a page being written is cut short
  Exporter(const Exporter&) = delete;
  Exporter& operator=(const Exporter&) = delete;

  int port() const { return port_; }
  // The page a scrape gets now.
  std::string Page() const;
  // Connections closed at once past the limit, and closed for a late head.
  int64_t connections_refused() const { return table_.refused(); }
  int64_t connections_overdue() const { return table_.overdue(); }

 private:
  Exporter(std::string role, Source source, int listen_fd, int port);
  // Accepts, admits or refuses, and closes overdue connections, until Stop.
  void AcceptLoop();

  // libmicrohttpd's callbacks, in exporter.cc (their `cls` is the exporter).
  friend struct MhdCallbacks;

  const std::string role_;
  const Source source_;
  const int listen_fd_;
  const int port_;
  int wake_[2] = {-1, -1};  // a pipe: written to stop the accept loop
  ConnectionTable table_{kMaxConnections, kHeadTimeout};
  MHD_Daemon* daemon_ = nullptr;
  std::thread acceptor_;
};

}  // namespace metrics
}  // namespace psc

#endif  // PSC_COMMON_METRICS_EXPORTER_H_
