// GET /metrics over HTTP: what a role's source answers at each scrape, then
// the process_* metrics and pscluster_build_info (process_metrics.h), in
// Prometheus' text format (prometheus-cpp's TextSerializer).
//
// The HTTP side is ours, on the data channel's TCP listener: one thread
// answers one request per connection (HTTP/1.0 style, "Connection: close").
// prometheus-cpp's exposer (civetweb) cannot run in the worker: civetweb
// starts its threads with a fixed 100 KB stack, below the static TLS that
// cuBLASLt and NCCL bring (about 124 KB), so pthread_create fails there.
#ifndef PSC_COMMON_METRICS_EXPORTER_H_
#define PSC_COMMON_METRICS_EXPORTER_H_

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/data_channel/socket_stream.h"
#include "prometheus/metric_family.h"

namespace psc {
namespace metrics {

// The reply to one HTTP request (its head, up to the blank line): 200 with
// the page for GET /metrics (a query string is ignored), 404 for another
// path, 405 for another method, 400 for what is not an HTTP request line.
// Transport-free, for tests.
std::string HttpReply(const std::string& request_head, const std::function<std::string()>& page);

// Thread-safe.
class Exporter {
 public:
  // The role's own families, read at each scrape (on the exporter's thread).
  using Source = std::function<std::vector<prometheus::MetricFamily>()>;

  // Serves on `host`:`port` (port 0 picks one). `source` must be
  // thread-safe and outlive the exporter. UNAVAILABLE with the OS's reason
  // when the address cannot be listened on.
  static absl::StatusOr<std::unique_ptr<Exporter>> Start(const std::string& host, int port,
                                                         const std::string& role, Source source);
  ~Exporter();  // stops serving; a request being answered ends first
  Exporter(const Exporter&) = delete;
  Exporter& operator=(const Exporter&) = delete;

  int port() const { return listener_->port(); }
  // The page a scrape gets now.
  std::string Page() const;

  // A request's head may be this long at most, and must arrive within
  // kRequestTimeout; a slower client is dropped.
  static constexpr size_t kMaxRequestHead = 8192;
  static constexpr absl::Duration kRequestTimeout = absl::Seconds(5);

 private:
  Exporter(std::string role, Source source, std::unique_ptr<data_channel::TcpListener> listener)
      : role_(std::move(role)), source_(std::move(source)), listener_(std::move(listener)) {}
  void AcceptLoop();
  void Answer(data_channel::SocketStream& stream);

  const std::string role_;
  const Source source_;
  const std::unique_ptr<data_channel::TcpListener> listener_;
  std::thread acceptor_;
};

}  // namespace metrics
}  // namespace psc

#endif  // PSC_COMMON_METRICS_EXPORTER_H_
