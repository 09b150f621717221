// Tests only: a plain HTTP/1.0 GET of a metrics endpoint.
#ifndef PSC_COMMON_METRICS_TESTING_HTTP_GET_H_
#define PSC_COMMON_METRICS_TESTING_HTTP_GET_H_

#include <string>

namespace psc {
namespace metrics {

// GET `path` on 127.0.0.1:port; the whole reply (headers and body), or ""
// when the connection fails. Reads time out after 10 s.
std::string HttpGet(int port, const std::string& path);
// Sends `request` as is; the whole reply.
std::string HttpRequest(int port, const std::string& request);

}  // namespace metrics
}  // namespace psc

#endif  // PSC_COMMON_METRICS_TESTING_HTTP_GET_H_
