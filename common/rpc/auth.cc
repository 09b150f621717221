#include "common/rpc/auth.h"

#include "common/cluster/auth_token.h"
#include "common/rpc/grpc_status.h"

namespace psc {
namespace rpc {

grpc::Status TokenAuthenticator::CheckMetadata(
    const std::multimap<grpc::string_ref, grpc::string_ref>& md) const {
  if (token_.empty()) return grpc::Status::OK;
  auto it = md.find(cluster::kAuthMetadataKey);
  if (it == md.end()) return ToGrpcStatus(cluster::CheckBearerToken(nullptr, token_));
  absl::string_view value(it->second.data(), it->second.size());
  return ToGrpcStatus(cluster::CheckBearerToken(&value, token_));
}

grpc::Status TokenAuthenticator::Check(const grpc::ServerContextBase& context) const {
  return CheckMetadata(context.client_metadata());
}

grpc::Status TokenAuthProcessor::Process(const InputMetadata& auth_metadata,
                                         grpc::AuthContext* context,
                                         OutputMetadata* consumed_auth_metadata,
                                         OutputMetadata* response_metadata) {
  // The token stays in the call's metadata: the handlers' guard checks it too.
  return auth_.CheckMetadata(auth_metadata);
}

void AttachToken(grpc::ClientContext* context, const std::string& token) {
  if (!token.empty())
    context->AddMetadata(cluster::kAuthMetadataKey, cluster::kBearerPrefix + token);
}

}  // namespace rpc
}  // namespace psc
