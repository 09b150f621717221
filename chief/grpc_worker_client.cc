#include "chief/grpc_worker_client.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/base/backoff.h"
#include "common/base/logging.h"
#include "common/base/status_macros.h"
#include "common/rpc/channel.h"
#include "common/rpc/grpc_status.h"
#include "proto/parameter_server.grpc.pb.h"

namespace psc {
namespace chief {

GrpcWorkerClient::GrpcWorkerClient(const std::vector<std::string>& addresses,
                                   const rpc::SecurityOptions& security)
    : security_(security), addresses_(addresses) {
  for (const std::string& a : addresses) {
    stubs_.push_back(proto::Worker::NewStub(rpc::CreateChannel(a, security)));
  }
  absl::MutexLock lock(&mu_);
  running_.assign(addresses.size(), nullptr);
  cancel_pending_.assign(addresses.size(), false);
}

absl::Status GrpcWorkerClient::StartJob(int worker, const proto::JobSpec& job) {
  // StartJob is idempotent, so a call that broke because the worker died
  // (and is being restarted: --restart_failed, an orchestrator) is made
  // again, waiting for the worker to listen, within one overall deadline.
  const absl::Time give_up = absl::Now() + absl::Minutes(5);
  base::Backoff backoff({absl::Milliseconds(200), 2.0, absl::Seconds(5), 0.2}, worker + 1);
  {
    absl::MutexLock lock(&mu_);
    job_ = job;
    // A cancel meant for the unit of a lost worker is not for its units
    // after it takes part again.
    cancel_pending_[worker] = false;
  }
  proto::StartJobRequest request;
  *request.mutable_job() = job;
  const std::string what = absl::StrCat("worker:", worker, " (", addresses_[worker], ") StartJob");
  for (;;) {
    grpc::ClientContext context;
    rpc::PrepareContext(&context, security_, std::max(give_up - absl::Now(), absl::Seconds(1)));
    context.set_wait_for_ready(true);
    proto::StartJobResponse response;
    absl::Status s =
        rpc::FromGrpcStatus(stubs_[worker]->StartJob(&context, request, &response), what);
    if (!absl::IsUnavailable(s) || absl::Now() >= give_up) return s;
    base::Logf("chief: %s; trying again", std::string(s.message()));
    absl::SleepFor(std::min(backoff.Next(), std::max(give_up - absl::Now(), absl::ZeroDuration())));
  }
}

absl::StatusOr<proto::UnitMetrics> GrpcWorkerClient::RunUnit(int worker,
                                                             const proto::RunUnitRequest& unit) {
  absl::StatusOr<proto::UnitMetrics> result = RunUnitOnce(worker, unit);
  // A worker restarted since StartJob (--restart_failed, an orchestrator)
  // answers FAILED_PRECONDITION: it has no job. It gets the job again and
  // the unit once more (its pushes, if any, are exactly once).
  if (!absl::IsFailedPrecondition(result.status()) || !RestartedWithoutJob(worker)) {
    return result;
  }
  std::optional<proto::JobSpec> job;
  {
    absl::MutexLock lock(&mu_);
    job = job_;
  }
  if (!job.has_value()) return result;
  base::Logf("chief: worker:%d restarted without the job; starting it there again", worker);
  PSC_RETURN_IF_ERROR(StartJob(worker, *job));
  return RunUnitOnce(worker, unit);
}

bool GrpcWorkerClient::RestartedWithoutJob(int worker) {
  grpc::ClientContext context;
  rpc::PrepareContext(&context, security_, absl::Seconds(3));
  proto::WorkerStatus status;
  return stubs_[worker]->GetStatus(&context, proto::GetStatusRequest(), &status).ok() &&
         status.state() == proto::WorkerStatus::IDLE;
}

absl::StatusOr<proto::UnitMetrics> GrpcWorkerClient::RunUnitOnce(
    int worker, const proto::RunUnitRequest& unit) {
  grpc::ClientContext context;
  rpc::PrepareContext(&context, security_, absl::Hours(24));
  {
    absl::MutexLock lock(&mu_);
    if (cancel_pending_[worker]) {
      cancel_pending_[worker] = false;
      return absl::CancelledError(absl::StrCat("worker:", worker, " RunUnit: cancelled"));
    }
    running_[worker] = &context;
  }
  proto::RunUnitResponse response;
  grpc::Status s = stubs_[worker]->RunUnit(&context, unit, &response);
  {
    absl::MutexLock lock(&mu_);
    running_[worker] = nullptr;
  }
  if (!s.ok()) {
    return rpc::FromGrpcStatus(s, absl::StrCat("worker:", worker, " (", addresses_[worker], ")"));
  }
  return response.metrics();
}

void GrpcWorkerClient::CancelUnit(int worker) {
  absl::MutexLock lock(&mu_);
  if (running_[worker] != nullptr) {
    running_[worker]->TryCancel();
  } else {
    cancel_pending_[worker] = true;
  }
}

bool GrpcWorkerClient::Alive(int worker) {
  grpc::ClientContext context;
  rpc::PrepareContext(&context, security_, absl::Seconds(3));
  proto::WorkerStatus status;
  return stubs_[worker]->GetStatus(&context, proto::GetStatusRequest(), &status).ok();
}

absl::Status ShutdownCluster(const cluster::ClusterConfig& cluster,
                             const rpc::SecurityOptions& security, const std::string& reason) {
  absl::Status first;
  proto::ShutdownRequest request;
  request.set_reason(reason);
  proto::ShutdownResponse response;
  for (const cluster::TaskAddress& t : cluster.tasks(cluster::TaskType::kWorker)) {
    grpc::ClientContext context;
    rpc::PrepareContext(&context, security, absl::Seconds(10));
    grpc::Status s = proto::Worker::NewStub(rpc::CreateChannel(t.address.ToString(), security))
                         ->Shutdown(&context, request, &response);
    if (!s.ok() && first.ok()) first = rpc::FromGrpcStatus(s, t.Name() + " Shutdown");
  }
  for (const cluster::TaskAddress& t : cluster.tasks(cluster::TaskType::kPs)) {
    grpc::ClientContext context;
    rpc::PrepareContext(&context, security, absl::Seconds(10));
    grpc::Status s =
        proto::ParameterServer::NewStub(rpc::CreateChannel(t.address.ToString(), security))
            ->Shutdown(&context, request, &response);
    if (!s.ok() && first.ok()) first = rpc::FromGrpcStatus(s, t.Name() + " Shutdown");
  }
  return first;
}

}  // namespace chief
}  // namespace psc
