#include "ps_server/shard_calls.h"

#include <memory>

#include "absl/synchronization/notification.h"

namespace psc {
namespace ps_server {

void PushThenPull(Shard* shard, const proto::PushRequest& request, absl::Time pull_deadline,
                  proto::PushResponse* response, std::function<void(absl::Status)> done) {
  absl::Status pushed = shard->Push(request, response);
  if (!pushed.ok() || !request.pull_after()) {
    done(pushed);
    return;
  }
  proto::PullRequest pull;
  pull.set_min_version(request.pull_min_version());
  pull.set_worker(request.id().worker());
  pull.set_worker_clock(request.worker_clock());
  auto pulled = std::make_shared<proto::PullResponse>();
  shard->Pull(pull, pull_deadline, pulled.get(),
              [response, pulled, done = std::move(done)](absl::Status s) {
                if (s.ok()) {
                  response->set_version(pulled->version());
                  response->mutable_variables()->Swap(pulled->mutable_variables());
                }
                done(s);
              });
}

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

absl::Status PushThenPullBlocking(Shard* shard, const proto::PushRequest& request,
                                  absl::Time pull_deadline, proto::PushResponse* response) {
  return Wait([&](std::function<void(absl::Status)> done) {
    PushThenPull(shard, request, pull_deadline, response, std::move(done));
  });
}

absl::Status PullBlocking(Shard* shard, const proto::PullRequest& request, absl::Time deadline,
                          proto::PullResponse* response) {
  return Wait([&](std::function<void(absl::Status)> done) {
    shard->Pull(request, deadline, response, std::move(done));
  });
}

}  // namespace ps_server
}  // namespace psc
