#include "chief/grpc_task_prober.h"

#include "absl/strings/str_cat.h"
#include "common/rpc/channel.h"
#include "common/rpc/grpc_status.h"
#include "proto/health.grpc.pb.h"
#include "proto/parameter_server.grpc.pb.h"
#include "proto/worker.grpc.pb.h"

namespace psc {
namespace chief {
namespace {

// A daemon of another role at the address answers UNIMPLEMENTED (unknown
// method); say so in words.
absl::Status Explain(const grpc::Status& s, const cluster::TaskAddress& task) {
  if (s.error_code() == grpc::StatusCode::UNIMPLEMENTED) {
    return absl::FailedPreconditionError(
        absl::StrCat("the daemon at ", task.address.ToString(), " is not a ",
                     cluster::TaskTypeName(task.type), " (", s.error_message(), ")"));
  }
  return rpc::FromGrpcStatus(s);
}

absl::Status CheckIndex(int answered, const cluster::TaskAddress& task) {
  if (answered == task.index) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "the daemon at ", task.address.ToString(), " is ", cluster::TaskTypeName(task.type), ":",
      answered, ", not ", task.Name(), ": the tasks' TF_CONFIGs disagree"));
}

}  // namespace

std::shared_ptr<grpc::Channel> GrpcTaskProber::ChannelFor(const cluster::TaskAddress& task) {
  absl::MutexLock lock(&mu_);
  auto& channel = channels_[task.Name()];
  if (channel == nullptr) channel = rpc::CreateChannel(task.address.ToString(), security_);
  return channel;
}

absl::Status GrpcTaskProber::Probe(const cluster::TaskAddress& task, absl::Duration timeout) {
  std::shared_ptr<grpc::Channel> channel = ChannelFor(task);
  // Wait for a connection first: a fail-fast call on a channel in
  // TRANSIENT_FAILURE does not drive the reconnect (only gRPC's 5 s backup
  // poller would), so a task that just came up would be found late.
  if (!channel->WaitForConnected(absl::ToChronoTime(absl::Now() + timeout))) {
    // One fail-fast call to learn why (e.g. "Connection refused").
    grpc::ClientContext why;
    rpc::PrepareContext(&why, security_, absl::Milliseconds(200));
    grpc::health::v1::HealthCheckResponse ignored;
    grpc::Status s = grpc::health::v1::Health::NewStub(channel)->Check(
        &why, grpc::health::v1::HealthCheckRequest(), &ignored);
    return absl::UnavailableError(absl::StrCat("no connection within ",
                                               absl::FormatDuration(timeout), s.ok() ? "" : ": ",
                                               s.error_message()));
  }
  grpc::ClientContext context;
  rpc::PrepareContext(&context, security_, timeout);
  switch (task.type) {
    case cluster::TaskType::kPs: {
      proto::ShardStats stats;
      grpc::Status s = proto::ParameterServer::NewStub(channel)->GetStats(
          &context, proto::GetStatsRequest(), &stats);
      if (!s.ok()) return Explain(s, task);
      return CheckIndex(stats.shard_index(), task);
    }
    case cluster::TaskType::kWorker: {
      proto::WorkerStatus status;
      grpc::Status s =
          proto::Worker::NewStub(channel)->GetStatus(&context, proto::GetStatusRequest(), &status);
      if (!s.ok()) return Explain(s, task);
      return CheckIndex(status.task_index(), task);
    }
    default: {
      grpc::health::v1::HealthCheckRequest request;
      grpc::health::v1::HealthCheckResponse response;
      grpc::Status s =
          grpc::health::v1::Health::NewStub(channel)->Check(&context, request, &response);
      if (!s.ok()) return rpc::FromGrpcStatus(s);
      if (response.status() != grpc::health::v1::HealthCheckResponse::SERVING) {
        return absl::UnavailableError("not serving yet");
      }
      return absl::OkStatus();
    }
  }
}

}  // namespace chief
}  // namespace psc
