// The cluster token: loading it from --auth_token_file and comparing it.
// Transport-free; the gRPC side of authentication is common/rpc/auth.h.
#ifndef PSC_COMMON_CLUSTER_AUTH_TOKEN_H_
#define PSC_COMMON_CLUSTER_AUTH_TOKEN_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace psc {
namespace cluster {

// The metadata key every RPC carries the token under, as "Bearer <token>".
inline constexpr char kAuthMetadataKey[] = "authorization";
inline constexpr char kBearerPrefix[] = "Bearer ";
inline constexpr size_t kMinTokenLength = 16;
inline constexpr size_t kMaxTokenLength = 4096;

// Reads the token from `path`: the file's content without trailing
// whitespace, at least kMinTokenLength printable ASCII characters and no
// spaces. INVALID_ARGUMENT naming the file otherwise.
absl::StatusOr<std::string> LoadAuthToken(const std::string& path);

// Checks a token for the rules LoadAuthToken applies.
absl::Status ValidateAuthToken(absl::string_view token);

// Compares in time that depends only on the lengths, not on where they differ.
bool ConstantTimeEquals(absl::string_view a, absl::string_view b);

// Checks the value of the authorization metadata (null if absent) against
// `expected`. UNAUTHENTICATED with "missing cluster token" or "wrong cluster
// token"; never echoes what was presented.
absl::Status CheckBearerToken(const absl::string_view* presented, absl::string_view expected);

// A fresh random token (64 hex characters) from the kernel's CSPRNG.
absl::StatusOr<std::string> GenerateAuthToken();

}  // namespace cluster
}  // namespace psc

#endif  // PSC_COMMON_CLUSTER_AUTH_TOKEN_H_
