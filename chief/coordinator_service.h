// The Coordinator gRPC service the chief serves: a thin adapter over
// TaskRegistry that authenticates each call.
#ifndef PSC_CHIEF_COORDINATOR_SERVICE_H_
#define PSC_CHIEF_COORDINATOR_SERVICE_H_

#include <string>

#include "chief/task_registry.h"
#include "common/rpc/auth.h"
#include "proto/coordinator.grpc.pb.h"

namespace psc {
namespace chief {

// Thread-safe.
class CoordinatorService final : public proto::Coordinator::CallbackService {
 public:
  // `registry` is not owned.
  CoordinatorService(TaskRegistry* registry, std::string token)
      : registry_(registry), auth_(std::move(token)) {}

  grpc::ServerUnaryReactor* Register(grpc::CallbackServerContext* context,
                                     const proto::RegisterRequest* request,
                                     proto::RegisterResponse* response) override;
  grpc::ServerUnaryReactor* Heartbeat(grpc::CallbackServerContext* context,
                                      const proto::HeartbeatRequest* request,
                                      proto::HeartbeatResponse* response) override;
  grpc::ServerUnaryReactor* Report(grpc::CallbackServerContext* context,
                                   const proto::ReportRequest* request,
                                   proto::ReportResponse* response) override;

 private:
  TaskRegistry* const registry_;
  const rpc::TokenAuthenticator auth_;
};

}  // namespace chief
}  // namespace psc

#endif  // PSC_CHIEF_COORDINATOR_SERVICE_H_
