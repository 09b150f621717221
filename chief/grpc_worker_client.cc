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
                                   const rpc::SecurityOptions& security, int seats)
    : security_(security), seats_(std::max(seats, static_cast<int>(addresses.size()))) {
  absl::MutexLock lock(&mu_);
  addresses_ = addresses;
  addresses_.resize(seats_);
  for (const std::string& a : addresses) {
    stubs_.push_back(proto::Worker::NewStub(rpc::CreateChannel(a, security)));
  }
  stubs_.resize(seats_);
  running_.assign(seats_, nullptr);
  cancel_pending_.assign(seats_, false);
}

absl::Status GrpcWorkerClient::SetAddress(int worker, const std::string& address) {
  if (worker < 0 || worker >= seats_) {
    return absl::InvalidArgumentError(
        absl::StrCat("worker:", worker, " is outside the job's ", seats_, " seats"));
  }
  absl::MutexLock lock(&mu_);
  if (addresses_[worker] == address && stubs_[worker] != nullptr) return absl::OkStatus();
  addresses_[worker] = address;
  stubs_[worker] = proto::Worker::NewStub(rpc::CreateChannel(address, security_));
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<proto::Worker::Stub>> GrpcWorkerClient::Stub(int worker,
                                                                            std::string* address) {
  absl::MutexLock lock(&mu_);
  if (worker < 0 || worker >= seats_ || stubs_[worker] == nullptr) {
    return absl::UnavailableError(
        absl::StrCat("worker:", worker, " has no address (a vacant seat)"));
  }
  if (address != nullptr) *address = addresses_[worker];
  return stubs_[worker];
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
  std::string address;
  PSC_ASSIGN_OR_RETURN(const std::shared_ptr<proto::Worker::Stub> stub, Stub(worker, &address));
  const std::string what = absl::StrCat("worker:", worker, " (", address, ") StartJob");
  for (;;) {
    grpc::ClientContext context;
    rpc::PrepareContext(&context, security_, std::max(give_up - absl::Now(), absl::Seconds(1)));
    context.set_wait_for_ready(true);
    proto::StartJobResponse response;
    absl::Status s = rpc::FromGrpcStatus(stub->StartJob(&context, request, &response), what);
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
  absl::StatusOr<std::shared_ptr<proto::Worker::Stub>> stub = Stub(worker, nullptr);
  if (!stub.ok()) return false;
  grpc::ClientContext context;
  rpc::PrepareContext(&context, security_, absl::Seconds(3));
  proto::WorkerStatus status;
  return (*stub)->GetStatus(&context, proto::GetStatusRequest(), &status).ok() &&
         status.state() == proto::WorkerStatus::IDLE;
}

absl::StatusOr<proto::UnitMetrics> GrpcWorkerClient::RunUnitOnce(
    int worker, const proto::RunUnitRequest& unit) {
  std::string address;
  PSC_ASSIGN_OR_RETURN(const std::shared_ptr<proto::Worker::Stub> stub, Stub(worker, &address));
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
  grpc::Status s = stub->RunUnit(&context, unit, &response);
  {
    absl::MutexLock lock(&mu_);
    running_[worker] = nullptr;
  }
  if (!s.ok()) {
    return rpc::FromGrpcStatus(s, absl::StrCat("worker:", worker, " (", address, ")"));
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
  absl::StatusOr<std::shared_ptr<proto::Worker::Stub>> stub = Stub(worker, nullptr);
  if (!stub.ok()) return false;
  grpc::ClientContext context;
  rpc::PrepareContext(&context, security_, absl::Seconds(3));
  proto::WorkerStatus status;
  return (*stub)->GetStatus(&context, proto::GetStatusRequest(), &status).ok();
}

absl::Status ShutdownCluster(const cluster::ClusterConfig& cluster,
                             const rpc::SecurityOptions& security, const std::string& reason,
                             const std::map<int, std::string>& joined) {
  absl::Status first;
  proto::ShutdownRequest request;
  request.set_reason(reason);
  proto::ShutdownResponse response;
  std::vector<std::pair<std::string, std::string>> workers;  // name, address
  for (const cluster::TaskAddress& t : cluster.tasks(cluster::TaskType::kWorker)) {
    workers.emplace_back(t.Name(), t.address.ToString());
  }
  for (const auto& [index, address] : joined) {
    workers.emplace_back(absl::StrCat("worker:", index), address);
  }
  for (const auto& [name, address] : workers) {
    grpc::ClientContext context;
    rpc::PrepareContext(&context, security, absl::Seconds(10));
    grpc::Status s = proto::Worker::NewStub(rpc::CreateChannel(address, security))
                         ->Shutdown(&context, request, &response);
    if (!s.ok() && first.ok()) first = rpc::FromGrpcStatus(s, name + " Shutdown");
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
