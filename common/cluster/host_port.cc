#include "common/cluster/host_port.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"

namespace psc {
namespace cluster {
namespace {

bool IsIpv6Literal(const std::string& s) {
  in6_addr addr;
  return inet_pton(AF_INET6, s.c_str(), &addr) == 1;
}

// RFC 1123 host names: letters, digits, '-' and '.', plus '_' which
// Kubernetes and docker-compose service names may contain.
bool IsValidHostName(absl::string_view s) {
  if (s.empty() || s.size() > 253) return false;
  for (char c : s) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '.' && c != '_') {
      return false;
    }
  }
  return s.front() != '.' && s.front() != '-';
}

}  // namespace

std::string HostPort::ToString() const {
  if (absl::StrContains(host, ':')) return absl::StrCat("[", host, "]:", port);
  return absl::StrCat(host, ":", port);
}

absl::StatusOr<std::string> ParseHost(absl::string_view host) {
  if (host.empty()) return absl::InvalidArgumentError("empty host");
  if (host.front() == '[') {
    if (host.back() != ']') return absl::InvalidArgumentError("unclosed '[' in IPv6 host");
    std::string inner(host.substr(1, host.size() - 2));
    if (!IsIpv6Literal(inner)) {
      return absl::InvalidArgumentError(absl::StrCat("\"", inner, "\" is not an IPv6 address"));
    }
    return inner;
  }
  std::string h(host);
  if (absl::StrContains(h, ':')) {
    if (IsIpv6Literal(h)) return h;
    return absl::InvalidArgumentError(absl::StrCat("\"", h, "\" is not a valid host"));
  }
  if (!IsValidHostName(h)) {
    return absl::InvalidArgumentError(absl::StrCat("\"", h, "\" is not a valid host name"));
  }
  return h;
}

absl::StatusOr<HostPort> ParseHostPort(absl::string_view address) {
  if (address.empty()) return absl::InvalidArgumentError("empty address");
  absl::string_view host, port;
  if (address.front() == '[') {
    size_t close = address.find(']');
    if (close == absl::string_view::npos) {
      return absl::InvalidArgumentError("unclosed '[' in IPv6 address");
    }
    host = address.substr(0, close + 1);
    absl::string_view rest = address.substr(close + 1);
    if (rest.empty()) return absl::InvalidArgumentError("missing port (want host:port)");
    if (rest.front() != ':') {
      return absl::InvalidArgumentError("expected ':' after ']' (want [v6]:port)");
    }
    port = rest.substr(1);
  } else {
    size_t colon = address.rfind(':');
    if (colon == absl::string_view::npos) {
      return absl::InvalidArgumentError("missing port (want host:port)");
    }
    host = address.substr(0, colon);
    port = address.substr(colon + 1);
    if (absl::StrContains(host, ':')) {
      return absl::InvalidArgumentError(
          "an IPv6 address needs brackets (want [v6]:port, e.g. [::1]:2222)");
    }
  }
  if (host.empty()) return absl::InvalidArgumentError("missing host (want host:port)");
  if (port.empty()) return absl::InvalidArgumentError("missing port (want host:port)");
  for (char c : port) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(c))) {
      return absl::InvalidArgumentError(absl::StrCat("port \"", port, "\" is not a number"));
    }
  }
  int64_t p = 0;
  if (port.size() > 6 || !absl::SimpleAtoi(port, &p) || p < 1 || p > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("port ", port, " out of range 1-65535"));
  }
  HostPort hp;
  PSC_ASSIGN_OR_RETURN(auto h, ParseHost(host));
  hp.host = std::move(h);
  hp.port = static_cast<int>(p);
  return hp;
}

bool IsLoopbackHost(const std::string& host) {
  addrinfo hints;
  std::memset(&hints, 0, sizeof(hints));
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (getaddrinfo(host.c_str(), nullptr, &hints, &res) != 0 || res == nullptr) return false;
  bool all_loopback = true;
  for (addrinfo* a = res; a != nullptr; a = a->ai_next) {
    if (a->ai_family == AF_INET) {
      auto* in = reinterpret_cast<sockaddr_in*>(a->ai_addr);
      if ((ntohl(in->sin_addr.s_addr) >> 24) != 127) all_loopback = false;
    } else if (a->ai_family == AF_INET6) {
      auto* in6 = reinterpret_cast<sockaddr_in6*>(a->ai_addr);
      if (!IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr)) all_loopback = false;
    } else {
      all_loopback = false;
    }
  }
  freeaddrinfo(res);
  return all_loopback;
}

}  // namespace cluster
}  // namespace psc
