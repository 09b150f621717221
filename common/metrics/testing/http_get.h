// Tests only: plain HTTP clients of a metrics endpoint.
#ifndef PSC_COMMON_METRICS_TESTING_HTTP_GET_H_
#define PSC_COMMON_METRICS_TESTING_HTTP_GET_H_

#include <string>

#include "absl/time/time.h"

namespace psc {
namespace metrics {

// GET `path` on 127.0.0.1:port; the whole reply (headers and body), or ""
// when the connection fails or is closed unanswered. Reads time out after 10 s.
std::string HttpGet(int port, const std::string& path);
// Sends `request` as is; the whole reply.
std::string HttpRequest(int port, const std::string& request);

// A client connection held open, for tests of slow and idle clients.
// Move-only; closes its socket when destroyed.
class TestConnection {
 public:
  static TestConnection Open(int port);  // to 127.0.0.1:port; !ok() if it failed
  TestConnection(TestConnection&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  TestConnection& operator=(TestConnection&&) = delete;
  TestConnection(const TestConnection&) = delete;
  ~TestConnection();

  bool ok() const { return fd_ >= 0; }
  // Sends all of `bytes`; false if the connection is gone.
  bool Send(const std::string& bytes);
  // Whether the server closes the connection (end of stream or reset)
  // within `wait`, reading and dropping whatever it sends meanwhile.
  bool ClosedWithin(absl::Duration wait);

 private:
  explicit TestConnection(int fd) : fd_(fd) {}
  int fd_;
};

}  // namespace metrics
}  // namespace psc

#endif  // PSC_COMMON_METRICS_TESTING_HTTP_GET_H_
