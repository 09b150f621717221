// TLS for the data channel (OpenSSL): the same certificates and mutual
// verification as gRPC's channels under --tls_* (common/rpc/security.h), so
// that tensor bytes keep the data channel's speed without bypassing TLS.
// Each side presents its certificate and verifies its peer's against the
// cluster CA; the client also checks that the server's certificate names
// the host it connected to (an IP address or a DNS name), as gRPC does.
// TLS 1.2 at least (1.3 when both sides have it).
#ifndef PSC_COMMON_DATA_CHANNEL_TLS_H_
#define PSC_COMMON_DATA_CHANNEL_TLS_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"

typedef struct ssl_ctx_st SSL_CTX;

namespace psc {
namespace data_channel {

// Thread-safe (immutable once made).
class TlsConfig {
 public:
  // INVALID_ARGUMENT naming what cannot be read: a certificate, key or CA
  // that is not PEM, or a key that does not match the certificate.
  static absl::StatusOr<std::shared_ptr<const TlsConfig>> Create(const std::string& cert_pem,
                                                                 const std::string& key_pem,
                                                                 const std::string& ca_pem);
  ~TlsConfig();
  TlsConfig(const TlsConfig&) = delete;
  TlsConfig& operator=(const TlsConfig&) = delete;

  SSL_CTX* server() const { return server_; }
  SSL_CTX* client() const { return client_; }

 private:
  TlsConfig() = default;
  SSL_CTX* server_ = nullptr;
  SSL_CTX* client_ = nullptr;
};

// OpenSSL's queued errors as one line ("" when none), and clears them.
std::string TakeOpenSslErrors();

}  // namespace data_channel
}  // namespace psc

#endif  // PSC_COMMON_DATA_CHANNEL_TLS_H_
