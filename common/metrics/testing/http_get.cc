#include "common/metrics/testing/http_get.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"

namespace psc {
namespace metrics {

std::string HttpGet(int port, const std::string& path) {
  return HttpRequest(port, absl::StrCat("GET ", path, " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n"));
}

std::string HttpRequest(int port, const std::string& req) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return "";
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  timeval tv{10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  std::string out;
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      write(fd, req.data(), req.size()) == static_cast<ssize_t>(req.size())) {
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

}  // namespace metrics
}  // namespace psc
