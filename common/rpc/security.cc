#include "common/rpc/security.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"
#include "common/cluster/auth_token.h"
#include "common/cluster/host_port.h"
#include "common/rpc/auth.h"

namespace psc {
namespace rpc {
namespace {

absl::StatusOr<std::string> ReadPem(const char* flag, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, "=", path, ": cannot read: ", std::strerror(errno)));
  }
  std::stringstream buffer;
  buffer << in.rdbuf();
  std::string pem = buffer.str();
  if (pem.find("-----BEGIN ") == std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, "=", path, ": not a PEM file (no -----BEGIN line)"));
  }
  return pem;
}

}  // namespace

absl::StatusOr<SecurityOptions> LoadSecurityOptions(const std::string& token_file,
                                                    const std::string& tls_cert_file,
                                                    const std::string& tls_key_file,
                                                    const std::string& tls_ca_file) {
  SecurityOptions out;
  if (!token_file.empty()) {
    PSC_ASSIGN_OR_RETURN(auto token, cluster::LoadAuthToken(token_file));
    out.token = std::move(token);
  }
  const int given = !tls_cert_file.empty() + !tls_key_file.empty() + !tls_ca_file.empty();
  if (given != 0 && given != 3) {
    return absl::InvalidArgumentError(
        "TLS needs all three of --tls_cert, --tls_key and --tls_ca (mutual TLS)");
  }
  if (given == 3) {
    out.tls = true;
    PSC_ASSIGN_OR_RETURN(auto cert, ReadPem("tls_cert", tls_cert_file));
    PSC_ASSIGN_OR_RETURN(auto key, ReadPem("tls_key", tls_key_file));
    PSC_ASSIGN_OR_RETURN(auto ca, ReadPem("tls_ca", tls_ca_file));
    out.tls_cert_pem = std::move(cert);
    out.tls_key_pem = std::move(key);
    out.tls_ca_pem = std::move(ca);
  }
  return out;
}

absl::Status CheckListenAllowed(const std::string& host, const SecurityOptions& security,
                                bool allow_insecure) {
  if (!security.token.empty() || allow_insecure || cluster::IsLoopbackHost(host))
    return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "refusing to listen on non-loopback address \"", host,
      "\" without a cluster token: pass --auth_token_file (or --allow_insecure to accept "
      "anyone who can reach the port)"));
}

std::shared_ptr<grpc::ServerCredentials> MakeServerCredentials(const SecurityOptions& security) {
  if (!security.tls) return grpc::InsecureServerCredentials();
  grpc::SslServerCredentialsOptions options(
      GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  options.pem_root_certs = security.tls_ca_pem;
  options.pem_key_cert_pairs.push_back({security.tls_key_pem, security.tls_cert_pem});
  std::shared_ptr<grpc::ServerCredentials> creds = grpc::SslServerCredentials(options);
  if (!security.token.empty()) {
    creds->SetAuthMetadataProcessor(std::make_shared<TokenAuthProcessor>(security.token));
  }
  return creds;
}

std::shared_ptr<grpc::ChannelCredentials> MakeChannelCredentials(const SecurityOptions& security) {
  if (!security.tls) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions options;
  options.pem_root_certs = security.tls_ca_pem;
  options.pem_private_key = security.tls_key_pem;
  options.pem_cert_chain = security.tls_cert_pem;
  return grpc::SslCredentials(options);
}

}  // namespace rpc
}  // namespace psc
