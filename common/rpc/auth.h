// Token authentication on gRPC: the single guard every handler passes
// through, the TLS-side AuthMetadataProcessor, and attaching the token to
// outgoing calls.
//
// gRPC 1.51 runs an AuthMetadataProcessor only on secure credentials, and its
// server interceptors cannot refuse a call. So the check lives in
// TokenAuthenticator::Check, which rpc::UnaryService (unary_service.h) runs
// first for every method of every service; over TLS the processor also runs
// it before the call reaches the service. A test calls every method of every service through a
// generic stub without a token, so a handler that forgets the guard fails it.
#ifndef PSC_COMMON_RPC_AUTH_H_
#define PSC_COMMON_RPC_AUTH_H_

#include <string>

#include "grpcpp/client_context.h"
#include "grpcpp/security/auth_metadata_processor.h"
#include "grpcpp/server_context.h"
#include "grpcpp/support/status.h"

namespace psc {
namespace rpc {

// Checks the token a call carries. Immutable; thread-safe.
class TokenAuthenticator {
 public:
  // An empty `token` accepts every call (a loopback cluster with no token).
  explicit TokenAuthenticator(std::string token) : token_(std::move(token)) {}

  // OK, or UNAUTHENTICATED ("missing cluster token" / "wrong cluster token").
  grpc::Status Check(const grpc::ServerContextBase& context) const;
  grpc::Status CheckMetadata(const std::multimap<grpc::string_ref, grpc::string_ref>& md) const;

  bool enabled() const { return !token_.empty(); }

 private:
  const std::string token_;
};

// Checks the token over TLS, before the call reaches any handler.
class TokenAuthProcessor : public grpc::AuthMetadataProcessor {
 public:
  explicit TokenAuthProcessor(std::string token) : auth_(std::move(token)) {}
  bool IsBlocking() const override { return false; }
  grpc::Status Process(const InputMetadata& auth_metadata, grpc::AuthContext* context,
                       OutputMetadata* consumed_auth_metadata,
                       OutputMetadata* response_metadata) override;

 private:
  TokenAuthenticator auth_;
};

// Adds the token (if any) to an outgoing call.
void AttachToken(grpc::ClientContext* context, const std::string& token);

}  // namespace rpc
}  // namespace psc

#endif  // PSC_COMMON_RPC_AUTH_H_
