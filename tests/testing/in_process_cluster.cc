#include "tests/testing/in_process_cluster.h"

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"

namespace psc {
namespace testing {

InProcessShards::InProcessShards(int num_shards) : num_shards_(num_shards) {
  absl::MutexLock lock(&mu_);
  for (int i = 0; i < num_shards; ++i) servers_.push_back(New(i));
}

InProcessShards::~InProcessShards() {
  for (int i = 0; i < num_shards_; ++i) Get(i)->Stop();
}

std::shared_ptr<ps_server::ShardServer> InProcessShards::New(int i) {
  ps_server::ShardServerOptions options;
  options.task_index = i;
  options.shard.clock = &clock_;
  return std::make_shared<ps_server::ShardServer>(options);
}

std::shared_ptr<ps_server::ShardServer> InProcessShards::Get(int i) const {
  absl::MutexLock lock(&mu_);
  return servers_[i];
}

void InProcessShards::Restart(int i) {
  std::shared_ptr<ps_server::ShardServer> old;
  {
    absl::MutexLock lock(&mu_);
    old = servers_[i];
    servers_[i] = New(i);
  }
  old->Stop();
}

namespace {

// One call that may wait (Pull, Push with pull_after), ended early by the
// attempt's cancellation. The shard answers into state the call shares with
// it, so that an abandoned call leaves the caller's response alone.
template <typename Response, typename Start>
absl::Status WaitableCall(const ps_client::Attempt& attempt, Response* response, Start start) {
  struct State {
    absl::Mutex mu;
    bool finished ABSL_GUARDED_BY(mu) = false;
    absl::Status status ABSL_GUARDED_BY(mu);
    absl::Notification done;
    Response response;
    void Finish(absl::Status s) {
      {
        absl::MutexLock lock(&mu);
        if (finished) return;
        finished = true;
        status = std::move(s);
      }
      done.Notify();
    }
  };
  auto state = std::make_shared<State>();  // a fresh response, as over a wire
  ps_client::CancelScope scope(attempt,
                               [state] { state->Finish(absl::CancelledError("cancelled")); });
  if (!scope.ok()) return absl::CancelledError("cancelled");
  start(&state->response, [state](absl::Status s) { state->Finish(std::move(s)); });
  state->done.WaitForNotification();
  absl::MutexLock lock(&state->mu);
  if (state->status.ok()) *response = std::move(state->response);
  return state->status;
}

}  // namespace

void InProcessShards::SetPushGate(std::function<void(const proto::PushRequest&)> gate) {
  absl::MutexLock lock(&mu_);
  push_gate_ = std::move(gate);
}

std::function<void(const proto::PushRequest&)> InProcessShards::push_gate() const {
  absl::MutexLock lock(&mu_);
  return push_gate_;
}

absl::Status InProcessShardTransport::Push(const proto::PushRequest& request,
                                           proto::PushResponse* response,
                                           const ps_client::Attempt& attempt) {
  if (auto gate = shards_->push_gate()) gate(request);
  auto server = shards_->Get(index_);
  const absl::Time deadline = shards_->clock()->Now() + attempt.timeout;
  return WaitableCall(attempt, response, [&](proto::PushResponse* r, auto done) {
    server->Push(request, deadline, r, std::move(done));
  });
}

absl::Status InProcessShardTransport::Pull(const proto::PullRequest& request,
                                           proto::PullResponse* response,
                                           const ps_client::Attempt& attempt) {
  auto server = shards_->Get(index_);
  const absl::Time deadline = shards_->clock()->Now() + attempt.timeout;
  return WaitableCall(attempt, response, [&](proto::PullResponse* r, auto done) {
    server->Pull(request, deadline, r, std::move(done));
  });
}

absl::Status InProcessShardTransport::Configure(const proto::ConfigureRequest& request,
                                                const ps_client::Attempt&) {
  return shards_->Get(index_)->Configure(request);
}

absl::Status InProcessShardTransport::CreateVariables(const proto::CreateVariablesRequest& request,
                                                      const ps_client::Attempt&) {
  proto::CreateVariablesResponse response;
  return shards_->Get(index_)->CreateVariables(request, &response);
}

absl::Status InProcessShardTransport::UpdateMembership(
    const proto::UpdateMembershipRequest& request, proto::UpdateMembershipResponse* response,
    const ps_client::Attempt&) {
  return shards_->Get(index_)->UpdateMembership(request, response);
}

absl::Status InProcessShardTransport::SaveCheckpoint(const proto::SaveCheckpointRequest& request,
                                                     proto::SaveCheckpointResponse* response,
                                                     const ps_client::Attempt&) {
  return shards_->Get(index_)->SaveCheckpoint(request, response);
}

absl::Status InProcessShardTransport::RestoreCheckpoint(
    const proto::RestoreCheckpointRequest& request, proto::RestoreCheckpointResponse* response,
    const ps_client::Attempt&) {
  return shards_->Get(index_)->RestoreCheckpoint(request, response);
}

absl::Status InProcessShardTransport::ExportState(const proto::ExportStateRequest& request,
                                                  proto::ExportStateResponse* response,
                                                  const ps_client::Attempt&) {
  return shards_->Get(index_)->ExportState(request, response);
}

absl::Status InProcessShardTransport::ImportState(const proto::ImportStateRequest& request,
                                                  proto::ImportStateResponse* response,
                                                  const ps_client::Attempt&) {
  return shards_->Get(index_)->ImportState(request, response);
}

absl::Status InProcessShardTransport::GetStats(proto::ShardStats* response,
                                               const ps_client::Attempt&) {
  *response = shards_->Get(index_)->Stats();
  return absl::OkStatus();
}

absl::Status InProcessShardTransport::OpenDataChannel(proto::OpenDataChannelResponse*,
                                                      const ps_client::Attempt&) {
  return absl::FailedPreconditionError("in-process shards have no data channel");
}

namespace {

std::vector<ps_client::ShardEndpoint> Endpoints(InProcessShards* shards) {
  std::vector<ps_client::ShardEndpoint> out;
  for (int i = 0; i < shards->size(); ++i) {
    ps_client::ShardEndpoint e;
    e.name = absl::StrCat("ps:", i, " (in process)");
    e.transport = std::make_unique<InProcessShardTransport>(shards, i);
    out.push_back(std::move(e));
  }
  return out;
}

}  // namespace

InProcessParameterClient::InProcessParameterClient(int num_shards)
    : InProcessParameterClient(std::make_shared<InProcessShards>(num_shards)) {}

InProcessParameterClient::InProcessParameterClient(std::shared_ptr<InProcessShards> shards)
    : internal::ShardsHolder(std::move(shards)),
      ps_client::ParameterServerClient(Endpoints(this->shards.get())) {}

InProcessWorkerClient::InProcessWorkerClient(int num_workers, InProcessParameterClient* servers)
    : num_workers_(num_workers) {
  for (int w = 0; w < num_workers; ++w) {
    clients_.push_back(std::make_unique<InProcessParameterClient>(servers->all_shards()));
    cores_.push_back(std::make_unique<worker::WorkerCore>(w, std::vector<proto::DeviceInfo>{},
                                                          clients_.back().get()));
  }
}

InProcessWorkerClient::~InProcessWorkerClient() {
  for (auto& core : cores_) core->Stop();
}

absl::Status InProcessWorkerClient::StartJob(int worker, const proto::JobSpec& job) {
  return cores_[worker]->StartJob(job);
}

absl::StatusOr<proto::UnitMetrics> InProcessWorkerClient::Run(int worker,
                                                              const proto::RunUnitRequest& unit) {
  absl::Notification done;
  absl::StatusOr<proto::UnitMetrics> result = absl::UnknownError("not run");
  cores_[worker]->RunUnit(unit, [&](absl::StatusOr<proto::UnitMetrics> m) {
    result = std::move(m);
    done.Notify();
  });
  done.WaitForNotification();
  return result;
}

absl::StatusOr<proto::UnitMetrics> InProcessWorkerClient::RunUnit(
    int worker, const proto::RunUnitRequest& unit) {
  int64_t kill_at = -1;
  {
    absl::MutexLock lock(&mu_);
    if (dead_.count(worker)) return absl::UnavailableError("worker is dead");
    auto it = kill_at_.find(worker);
    if (it != kill_at_.end()) kill_at = std::max(it->second, unit.first_step());
  }
  const int64_t end = unit.first_step() + unit.num_steps();
  if (kill_at < 0 || kill_at >= end) return Run(worker, unit);
  proto::RunUnitRequest part = unit;
  part.set_num_steps(kill_at - unit.first_step());
  if (part.num_steps() > 0) {
    auto partial = Run(worker, part);
    if (!partial.ok()) return partial.status();
  }
  absl::MutexLock lock(&mu_);
  dead_.insert(worker);
  return absl::UnavailableError("worker killed");
}

void InProcessWorkerClient::CancelUnit(int) {
  // In process, a lost worker is one the test killed: its unit has ended.
}

bool InProcessWorkerClient::Alive(int worker) {
  absl::MutexLock lock(&mu_);
  return dead_.count(worker) == 0;
}

void InProcessWorkerClient::KillAtStep(int worker, int64_t step) {
  absl::MutexLock lock(&mu_);
  kill_at_[worker] = step;
}

}  // namespace testing
}  // namespace psc
