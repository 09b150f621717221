// The one place where absl::Status and grpc::Status convert into each other.
// The canonical codes map 1:1; messages pass through unchanged.
#ifndef PSC_COMMON_RPC_GRPC_STATUS_H_
#define PSC_COMMON_RPC_GRPC_STATUS_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "grpcpp/support/status.h"

namespace psc {
namespace rpc {

grpc::Status ToGrpcStatus(const absl::Status& status);

// `context` (e.g. "worker:1 GetStatus"), if given, prefixes the message.
absl::Status FromGrpcStatus(const grpc::Status& status, absl::string_view context = "");

}  // namespace rpc
}  // namespace psc

#endif  // PSC_COMMON_RPC_GRPC_STATUS_H_
