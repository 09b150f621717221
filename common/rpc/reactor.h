// Finishing unary callback calls in one line.
#ifndef PSC_COMMON_RPC_REACTOR_H_
#define PSC_COMMON_RPC_REACTOR_H_

#include "absl/status/status.h"
#include "common/rpc/grpc_status.h"
#include "grpcpp/server_context.h"

namespace psc {
namespace rpc {

// Finishes the call with `status` and returns the reactor a handler returns.
inline grpc::ServerUnaryReactor* FinishUnary(grpc::CallbackServerContext* context,
                                             const grpc::Status& status) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(status);
  return reactor;
}

inline grpc::ServerUnaryReactor* FinishUnary(grpc::CallbackServerContext* context,
                                             const absl::Status& status) {
  return FinishUnary(context, ToGrpcStatus(status));
}

}  // namespace rpc
}  // namespace psc

#endif  // PSC_COMMON_RPC_REACTOR_H_
