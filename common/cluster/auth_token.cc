#include "common/cluster/auth_token.h"

#include <sys/random.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace psc {
namespace cluster {

absl::Status ValidateAuthToken(absl::string_view token) {
  if (token.size() < kMinTokenLength) {
    return absl::InvalidArgumentError(absl::StrCat("token is ", token.size(),
                                                   " characters; use at least ", kMinTokenLength,
                                                   " (e.g. `openssl rand -hex 32`)"));
  }
  if (token.size() > kMaxTokenLength) {
    return absl::InvalidArgumentError(
        absl::StrCat("token is longer than ", kMaxTokenLength, " characters"));
  }
  for (char c : token) {
    if (c <= ' ' || c > '~') {
      return absl::InvalidArgumentError(
          "token must be printable ASCII without spaces (it travels as gRPC metadata)");
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> LoadAuthToken(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::InvalidArgumentError(
        absl::StrCat("--auth_token_file=", path, ": cannot read: ", std::strerror(errno)));
  }
  std::stringstream buffer;
  buffer << in.rdbuf();
  std::string token(absl::StripTrailingAsciiWhitespace(buffer.str()));
  absl::Status valid = ValidateAuthToken(token);
  if (!valid.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--auth_token_file=", path, ": ", valid.message()));
  }
  return token;
}

bool ConstantTimeEquals(absl::string_view a, absl::string_view b) {
  if (a.size() != b.size()) return false;
  volatile unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff = diff | static_cast<unsigned char>(a[i] ^ b[i]);
  }
  return diff == 0;
}

absl::Status CheckBearerToken(const absl::string_view* presented, absl::string_view expected) {
  if (presented == nullptr) {
    return absl::UnauthenticatedError("missing cluster token (see --auth_token_file)");
  }
  absl::string_view value = *presented;
  if (!absl::ConsumePrefix(&value, kBearerPrefix) || !ConstantTimeEquals(value, expected)) {
    return absl::UnauthenticatedError("wrong cluster token");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> GenerateAuthToken() {
  unsigned char bytes[32];
  size_t got = 0;
  while (got < sizeof(bytes)) {
    ssize_t n = getrandom(bytes + got, sizeof(bytes) - got, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return absl::InternalError(absl::StrCat("getrandom: ", std::strerror(errno)));
    }
    got += static_cast<size_t>(n);
  }
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(bytes), sizeof(bytes)));
}

}  // namespace cluster
}  // namespace psc
