#include "worker/worker_service.h"

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "common/daemon/daemon.h"
#include "common/daemon/daemon_flags.h"
#include "common/rpc/grpc_status.h"
#include "common/rpc/reactor.h"

namespace psc {
namespace worker {
WorkerService::WorkerService(int task_index, std::vector<proto::DeviceInfo> devices,
                             std::vector<std::string> ps_addresses, rpc::SecurityOptions security,
                             base::ShutdownSignal* shutdown, DeviceSetup device_setup)
    : task_index_(task_index),
      devices_(std::move(devices)),
      ps_addresses_(std::move(ps_addresses)),
      security_(std::move(security)),
      auth_(security_.token),
      shutdown_(shutdown),
      device_setup_(std::move(device_setup)) {}

WorkerService::~WorkerService() { Stop(); }

void WorkerService::Stop() {
  std::thread t;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    t = std::move(unit_thread_);
    // A unit blocked on the servers (a sync step waiting for a replica that
    // will not come) ends now instead of at its timeout.
    if (servers_ != nullptr) servers_->CancelAll();
  }
  if (t.joinable()) t.join();
}

grpc::ServerUnaryReactor* WorkerService::StartJob(grpc::CallbackServerContext* context,
                                                  const proto::StartJobRequest* request,
                                                  proto::StartJobResponse* response) {
  PSC_AUTHORIZE_UNARY(auth_, context);
  const std::string fingerprint = request->job().SerializeAsString();
  {
    absl::MutexLock lock(&mu_);
    if (running_) {
      return rpc::FinishUnary(
          context, absl::FailedPreconditionError("a unit is running; StartJob must wait for it"));
    }
    if (trainer_ != nullptr && job_fingerprint_ == fingerprint) {
      for (const auto& d : devices_) *response->add_devices() = d;
      return rpc::FinishUnary(context, absl::OkStatus());  // the same job again: a no-op
    }
  }
  if (request->job().placement().num_shards() != static_cast<int>(ps_addresses_.size())) {
    return rpc::FinishUnary(
        context, absl::InvalidArgumentError(absl::StrCat(
                     "the job places variables on ", request->job().placement().num_shards(),
                     " shards; this worker's cluster has ", ps_addresses_.size())));
  }
  // Building the trainer loads the data (about half a second): fine here,
  // StartJob comes once per job.
  auto servers = std::make_unique<rpc::GrpcParameterClient>(
      ps_addresses_, security_, absl::Seconds(60), absl::GetFlag(FLAGS_data_channel));
  auto trainer = ReplicaTrainer::Create(request->job(), task_index_, servers.get(), device_setup_);
  if (!trainer.ok()) return rpc::FinishUnary(context, trainer.status());
  absl::MutexLock lock(&mu_);
  servers_ = std::move(servers);
  trainer_ = *std::move(trainer);
  job_fingerprint_ = fingerprint;
  job_id_ = request->job().job_id();
  for (const auto& d : devices_) *response->add_devices() = d;
  return rpc::FinishUnary(context, absl::OkStatus());
}

grpc::ServerUnaryReactor* WorkerService::RunUnit(grpc::CallbackServerContext* context,
                                                 const proto::RunUnitRequest* request,
                                                 proto::RunUnitResponse* response) {
  PSC_AUTHORIZE_UNARY(auth_, context);
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  absl::MutexLock lock(&mu_);
  if (trainer_ == nullptr) {
    reactor->Finish(
        rpc::ToGrpcStatus(absl::FailedPreconditionError("no job: call StartJob first")));
    return reactor;
  }
  if (request->job_id() != job_id_) {
    reactor->Finish(rpc::ToGrpcStatus(absl::FailedPreconditionError(absl::StrCat(
        "unit of job \"", request->job_id(), "\"; this worker runs \"", job_id_, "\""))));
    return reactor;
  }
  if (running_ || stopping_) {
    reactor->Finish(rpc::ToGrpcStatus(absl::FailedPreconditionError(
        stopping_ ? "the worker is stopping" : "a unit is already running")));
    return reactor;
  }
  running_ = true;
  current_unit_ = request->unit();
  if (unit_thread_.joinable()) unit_thread_.join();  // the previous unit's finished thread
  ReplicaTrainer* trainer = trainer_.get();
  unit_thread_ = std::thread([this, trainer, reactor, request, response] {
    auto metrics = trainer->RunUnit(*request, [this] {
      absl::MutexLock lock(&mu_);
      return stopping_;
    });
    {
      absl::MutexLock lock(&mu_);
      running_ = false;
      if (metrics.ok()) steps_done_ += request->num_steps();
    }
    if (metrics.ok()) {
      response->set_steps_done(request->num_steps());
      *response->mutable_metrics() = *metrics;
    }
    reactor->Finish(rpc::ToGrpcStatus(metrics.status()));
  });
  return reactor;
}

grpc::ServerUnaryReactor* WorkerService::GetStatus(grpc::CallbackServerContext* context,
                                                   const proto::GetStatusRequest*,
                                                   proto::WorkerStatus* response) {
  PSC_AUTHORIZE_UNARY(auth_, context);
  response->set_task_index(task_index_);
  {
    absl::MutexLock lock(&mu_);
    response->set_state(shutdown_->requested() ? proto::WorkerStatus::STOPPING
                        : running_             ? proto::WorkerStatus::RUNNING
                        : trainer_ != nullptr  ? proto::WorkerStatus::READY
                                               : proto::WorkerStatus::IDLE);
    response->set_job_id(job_id_);
    response->set_current_unit(current_unit_);
    response->set_steps_done(steps_done_);
  }
  for (const proto::DeviceInfo& d : devices_) *response->add_devices() = d;
  return rpc::FinishUnary(context, grpc::Status::OK);
}

grpc::ServerUnaryReactor* WorkerService::Shutdown(grpc::CallbackServerContext* context,
                                                  const proto::ShutdownRequest* request,
                                                  proto::ShutdownResponse*) {
  PSC_AUTHORIZE_UNARY(auth_, context);
  shutdown_->Request(daemon::ShutdownRpcReason(context->peer(), request->reason()));
  return rpc::FinishUnary(context, grpc::Status::OK);
}

}  // namespace worker
}  // namespace psc
