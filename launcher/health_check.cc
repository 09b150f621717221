#include "launcher/health_check.h"

#include "absl/strings/str_cat.h"
#include "common/cluster/host_port.h"
#include "common/rpc/channel.h"
#include "common/rpc/grpc_status.h"
#include "proto/health.grpc.pb.h"

namespace psc {
namespace launcher {

absl::Status CheckHealth(const std::string& address, const rpc::SecurityOptions& security,
                         absl::Duration timeout) {
  if (absl::StatusOr<cluster::HostPort> parsed = cluster::ParseHostPort(address); !parsed.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("health ", address, ": ", parsed.status().message()));
  }
  std::shared_ptr<grpc::Channel> channel = rpc::CreateChannel(address, security);
  grpc::ClientContext context;
  rpc::PrepareContext(&context, security, timeout);
  context.set_wait_for_ready(true);  // a daemon still starting gets the whole timeout
  grpc::health::v1::HealthCheckResponse response;
  grpc::Status s = grpc::health::v1::Health::NewStub(channel)->Check(
      &context, grpc::health::v1::HealthCheckRequest(), &response);
  if (!s.ok()) {
    return absl::UnavailableError(absl::StrCat(address, ": ", rpc::FromGrpcStatus(s).message()));
  }
  if (response.status() != grpc::health::v1::HealthCheckResponse::SERVING) {
    return absl::UnavailableError(
        absl::StrCat(address, ": ",
                     grpc::health::v1::HealthCheckResponse::ServingStatus_Name(response.status())));
  }
  return absl::OkStatus();
}

}  // namespace launcher
}  // namespace psc
