// The chief's Coordinator service over gRPC, with the cluster token: each
// call one attempt of a few seconds (the heartbeat loop retries).
#ifndef PSC_WORKER_GRPC_COORDINATOR_CLIENT_H_
#define PSC_WORKER_GRPC_COORDINATOR_CLIENT_H_

#include <memory>
#include <string>

#include "common/rpc/security.h"
#include "proto/coordinator.grpc.pb.h"
#include "worker/heartbeat.h"

namespace psc {
namespace worker {

// Thread-safe.
class GrpcCoordinatorClient : public CoordinatorClient {
 public:
  GrpcCoordinatorClient(const std::string& chief_address, const rpc::SecurityOptions& security);
  absl::Status Register(const proto::RegisterRequest& request) override;
  absl::Status Heartbeat(const proto::HeartbeatRequest& request) override;
  absl::Status Report(const proto::ReportRequest& request) override;
  absl::StatusOr<proto::JoinResponse> Join(const proto::JoinRequest& request) override;
  absl::StatusOr<proto::LeaveResponse> Leave(const proto::LeaveRequest& request) override;

 private:
  const rpc::SecurityOptions security_;
  const std::string address_;
  const std::unique_ptr<proto::Coordinator::Stub> stub_;
};

}  // namespace worker
}  // namespace psc

#endif  // PSC_WORKER_GRPC_COORDINATOR_CLIENT_H_
