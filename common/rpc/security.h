// Security settings shared by servers and clients: the cluster token and TLS.
//
// Policy (DESIGN.md, "Security"):
//  - every RPC carries the token; servers answer UNAUTHENTICATED without it;
//  - --tls_cert/--tls_key/--tls_ca switch every channel to mutual TLS: each
//    daemon presents its certificate and verifies its peer's against the CA;
//  - a daemon refuses to listen on a non-loopback address without a token
//    unless --allow_insecure is given.
#ifndef PSC_COMMON_RPC_SECURITY_H_
#define PSC_COMMON_RPC_SECURITY_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/security/server_credentials.h"

namespace psc {
namespace rpc {

struct SecurityOptions {
  std::string token;  // empty: no token is sent or checked
  bool tls = false;
  std::string tls_cert_pem;
  std::string tls_key_pem;
  std::string tls_ca_pem;
};

// Loads the token and TLS files named by the flags (empty = not given). TLS
// needs all three of cert, key and CA. INVALID_ARGUMENT naming the flag and
// file on any problem.
absl::StatusOr<SecurityOptions> LoadSecurityOptions(const std::string& token_file,
                                                    const std::string& tls_cert_file,
                                                    const std::string& tls_key_file,
                                                    const std::string& tls_ca_file);

// Refuses (INVALID_ARGUMENT) to listen on non-loopback `host` without a token
// unless `allow_insecure`.
absl::Status CheckListenAllowed(const std::string& host, const SecurityOptions& security,
                                bool allow_insecure);

// Server credentials: insecure, or TLS requiring and verifying client
// certificates, with the token checked by an AuthMetadataProcessor.
std::shared_ptr<grpc::ServerCredentials> MakeServerCredentials(const SecurityOptions& security);

// Channel credentials: insecure, or TLS with the cluster CA and this
// daemon's certificate.
std::shared_ptr<grpc::ChannelCredentials> MakeChannelCredentials(const SecurityOptions& security);

}  // namespace rpc
}  // namespace psc

#endif  // PSC_COMMON_RPC_SECURITY_H_
