#include "common/metrics/exporter.h"

#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/base/logging.h"
#include "common/metrics/process_metrics.h"
#include "prometheus/text_serializer.h"

namespace psc {
namespace metrics {
namespace {

std::string Response(const char* status, const char* content_type, const std::string& body) {
  return absl::StrCat("HTTP/1.1 ", status, "\r\nContent-Type: ", content_type,
                      "\r\nContent-Length: ", body.size(), "\r\nConnection: close\r\n\r\n", body);
}

}  // namespace

std::string HttpReply(const std::string& request_head, const std::function<std::string()>& page) {
  const std::string line = request_head.substr(0, request_head.find("\r\n"));
  const std::vector<std::string> parts = absl::StrSplit(line, ' ');
  if (parts.size() != 3 || !absl::StartsWith(parts[2], "HTTP/")) {
    return Response("400 Bad Request", "text/plain", "not an HTTP request\n");
  }
  const std::string path = parts[1].substr(0, parts[1].find('?'));
  if (path != "/metrics") return Response("404 Not Found", "text/plain", "try /metrics\n");
  if (parts[0] != "GET") return Response("405 Method Not Allowed", "text/plain", "GET only\n");
  return Response("200 OK", "text/plain; version=0.0.4; charset=utf-8", page());
}

absl::StatusOr<std::unique_ptr<Exporter>> Exporter::Start(const std::string& host, int port,
                                                          const std::string& role, Source source) {
  auto listener = data_channel::TcpListener::Listen(host, port);
  if (!listener.ok()) {
    return absl::UnavailableError(absl::StrCat("cannot serve metrics on ", host, ":", port, ": ",
                                               listener.status().message()));
  }
  std::unique_ptr<Exporter> out(new Exporter(role, std::move(source), *std::move(listener)));
  out->acceptor_ = std::thread([e = out.get()] { e->AcceptLoop(); });
  return out;
}

Exporter::~Exporter() {
  listener_->Shutdown();
  if (acceptor_.joinable()) acceptor_.join();
}

std::string Exporter::Page() const {
  std::vector<prometheus::MetricFamily> families = source_();
  for (prometheus::MetricFamily& f : ProcessFamilies()) families.push_back(std::move(f));
  families.push_back(BuildInfoFamily(role_));
  std::ostringstream text;
  prometheus::TextSerializer().Serialize(text, families);
  return text.str();
}

void Exporter::AcceptLoop() {
  for (;;) {
    absl::StatusOr<std::unique_ptr<data_channel::SocketStream>> stream = listener_->Accept();
    if (absl::IsCancelled(stream.status())) return;  // Shutdown
    if (!stream.ok()) {
      base::Logf("metrics: %s; no longer serving", stream.status().message());
      return;
    }
    Answer(**stream);
  }
}

void Exporter::Answer(data_channel::SocketStream& stream) {
  // The head, a byte at a time up to the blank line (a scrape's is ~100
  // bytes), bounded in size and time.
  const absl::Time deadline = absl::Now() + kRequestTimeout;
  std::string head;
  while (head.size() < kMaxRequestHead && !absl::EndsWith(head, "\r\n\r\n") &&
         !absl::EndsWith(head, "\n\n")) {
    char c = 0;
    if (!stream.ReadExact(&c, 1, deadline).ok()) return;  // gone, or too slow
    head.push_back(c);
  }
  std::string reply = head.size() >= kMaxRequestHead
                          ? Response("431 Request Header Fields Too Large", "text/plain", "")
                          : HttpReply(head, [this] { return Page(); });
  std::vector<iovec> iov = {{reply.data(), reply.size()}};
  (void)stream.WriteAll(std::move(iov), absl::Now() + kRequestTimeout);
  stream.ShutdownWrite();
}

}  // namespace metrics
}  // namespace psc
