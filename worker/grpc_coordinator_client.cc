#include "worker/grpc_coordinator_client.h"

#include "absl/strings/str_cat.h"
#include "common/rpc/channel.h"
#include "common/rpc/grpc_status.h"

namespace psc {
namespace worker {
namespace {

constexpr absl::Duration kCoordinatorCallTimeout = absl::Seconds(5);

}  // namespace

GrpcCoordinatorClient::GrpcCoordinatorClient(const std::string& chief_address,
                                             const rpc::SecurityOptions& security)
    : security_(security),
      address_(chief_address),
      stub_(proto::Coordinator::NewStub(rpc::CreateChannel(chief_address, security))) {}

absl::Status GrpcCoordinatorClient::Register(const proto::RegisterRequest& request) {
  grpc::ClientContext context;
  rpc::PrepareContext(&context, security_, kCoordinatorCallTimeout);
  proto::RegisterResponse response;
  return rpc::FromGrpcStatus(stub_->Register(&context, request, &response),
                             absl::StrCat("chief (", address_, ") Register"));
}

absl::Status GrpcCoordinatorClient::Heartbeat(const proto::HeartbeatRequest& request) {
  grpc::ClientContext context;
  rpc::PrepareContext(&context, security_, kCoordinatorCallTimeout);
  proto::HeartbeatResponse response;
  return rpc::FromGrpcStatus(stub_->Heartbeat(&context, request, &response),
                             absl::StrCat("chief (", address_, ") Heartbeat"));
}

absl::Status GrpcCoordinatorClient::Report(const proto::ReportRequest& request) {
  grpc::ClientContext context;
  rpc::PrepareContext(&context, security_, kCoordinatorCallTimeout);
  proto::ReportResponse response;
  return rpc::FromGrpcStatus(stub_->Report(&context, request, &response),
                             absl::StrCat("chief (", address_, ") Report"));
}

absl::StatusOr<proto::JoinResponse> GrpcCoordinatorClient::Join(const proto::JoinRequest& request) {
  grpc::ClientContext context;
  rpc::PrepareContext(&context, security_, kCoordinatorCallTimeout);
  proto::JoinResponse response;
  absl::Status s = rpc::FromGrpcStatus(stub_->Join(&context, request, &response),
                                       absl::StrCat("chief (", address_, ") Join"));
  if (!s.ok()) return s;
  return response;
}

absl::StatusOr<proto::LeaveResponse> GrpcCoordinatorClient::Leave(
    const proto::LeaveRequest& request) {
  grpc::ClientContext context;
  rpc::PrepareContext(&context, security_, kCoordinatorCallTimeout);
  proto::LeaveResponse response;
  absl::Status s = rpc::FromGrpcStatus(stub_->Leave(&context, request, &response),
                                       absl::StrCat("chief (", address_, ") Leave"));
  if (!s.ok()) return s;
  return response;
}

}  // namespace worker
}  // namespace psc
