#include "ps_server/shard_server.h"

#include <algorithm>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"

namespace psc {
namespace ps_server {
namespace {

// Runs `start(done)` and waits for `done`.
template <typename Start>
absl::Status Wait(Start start) {
  struct State {
    absl::Notification done;
    absl::Status status;
  };
  auto state = std::make_shared<State>();
  start([state](absl::Status s) {
    state->status = std::move(s);
    state->done.Notify();
  });
  state->done.WaitForNotification();
  return state->status;
}

}  // namespace

ShardServer::ShardServer(const ShardServerOptions& options)
    : options_(options), shard_(options.shard) {
  if (options_.expiry_interval > absl::ZeroDuration()) {
    timer_ = std::thread([this] {
      while (!stop_.WaitForNotificationWithTimeout(options_.expiry_interval)) {
        shard_.ExpireWaiters();
      }
    });
  }
}

ShardServer::~ShardServer() { Stop(); }

void ShardServer::Stop() {
  if (!stop_.HasBeenNotified()) stop_.Notify();
  if (timer_.joinable()) timer_.join();
  shard_.Shutdown();
}

absl::Time ShardServer::WaitUntil(absl::Time deadline) const {
  return std::min(deadline, options_.shard.clock->Now() + options_.max_pull_wait);
}

absl::Status ShardServer::Configure(const proto::ConfigureRequest& request) {
  if (request.shard_index() != options_.task_index) {
    return absl::InvalidArgumentError(absl::StrCat("this server is ps:", options_.task_index,
                                                   "; Configure names shard ",
                                                   request.shard_index()));
  }
  return shard_.Configure(request);
}

absl::Status ShardServer::CreateVariables(const proto::CreateVariablesRequest& request,
                                          proto::CreateVariablesResponse* response) {
  return shard_.CreateVariables(request, response);
}

absl::Status ShardServer::UpdateMembership(const proto::UpdateMembershipRequest& request,
                                           proto::UpdateMembershipResponse* response) {
  return shard_.UpdateMembership(request, response);
}

absl::Status ShardServer::SaveCheckpoint(const proto::SaveCheckpointRequest& request,
                                         proto::SaveCheckpointResponse* response) {
  return shard_.SaveCheckpoint(request, response);
}

absl::Status ShardServer::RestoreCheckpoint(const proto::RestoreCheckpointRequest& request,
                                            proto::RestoreCheckpointResponse* response) {
  return shard_.RestoreCheckpoint(request, response);
}

absl::Status ShardServer::ExportState(const proto::ExportStateRequest& request,
                                      proto::ExportStateResponse* response) {
  return shard_.ExportState(request, response);
}

absl::Status ShardServer::ImportState(const proto::ImportStateRequest& request,
                                      proto::ImportStateResponse* response) {
  return shard_.ImportState(request, response);
}

proto::ShardStats ShardServer::Stats() const {
  proto::ShardStats stats = shard_.Stats();
  stats.set_shard_index(options_.task_index);
  return stats;
}

void ShardServer::Pull(const proto::PullRequest& request, absl::Time deadline,
                       proto::PullResponse* response, Done done) {
  shard_.Pull(request, WaitUntil(deadline), response, std::move(done));
}

void ShardServer::Push(const proto::PushRequest& request, absl::Time deadline,
                       proto::PushResponse* response, Done done) {
  absl::Status pushed = shard_.Push(request, response);
  if (!pushed.ok() || !request.pull_after()) {
    done(pushed);
    return;
  }
  proto::PullRequest pull;
  pull.set_min_version(request.pull_min_version());
  pull.set_worker(request.id().worker());
  pull.set_worker_clock(request.worker_clock());
  pull.set_wire_dtype(request.pull_wire_dtype());
  pull.set_skip_frozen(request.pull_skip_frozen());
  pull.set_skip_row_sparse(request.pull_skip_row_sparse());
  auto pulled = std::make_shared<proto::PullResponse>();
  shard_.Pull(pull, WaitUntil(deadline), pulled.get(),
              [response, pulled, done = std::move(done)](absl::Status s) {
                if (s.ok()) {
                  response->set_version(pulled->version());
                  response->set_loss_scale(pulled->loss_scale());
                  response->mutable_variables()->Swap(pulled->mutable_variables());
                }
                done(s);
              });
}

absl::Status ShardServer::PullBlocking(const proto::PullRequest& request, absl::Time deadline,
                                       proto::PullResponse* response) {
  return Wait([&](Done done) { Pull(request, deadline, response, std::move(done)); });
}

absl::Status ShardServer::PushBlocking(const proto::PushRequest& request, absl::Time deadline,
                                       proto::PushResponse* response) {
  return Wait([&](Done done) { Push(request, deadline, response, std::move(done)); });
}

}  // namespace ps_server
}  // namespace psc
