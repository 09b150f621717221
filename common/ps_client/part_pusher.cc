#include "common/ps_client/part_pusher.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace psc {
namespace ps_client {

PartPusher::PartPusher(ParameterClient* client, absl::Duration timeout, base::Clock* clock)
    : client_(client), timeout_(timeout), clock_(clock != nullptr ? clock : &real_clock_) {
  const int shards = client_->num_shards();
  {
    absl::MutexLock lock(&mu_);
    queues_.resize(shards);
    last_.resize(shards);
    pulls_.resize(shards);
  }
  for (int s = 0; s < shards; ++s) threads_.emplace_back([this, s] { Run(s); });
}

PartPusher::~PartPusher() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
    changed_.SignalAll();
  }
  for (std::thread& t : threads_) t.join();
}

void PartPusher::Send(int shard, proto::PushRequest part) {
  absl::MutexLock lock(&mu_);
  ++pushes_outstanding_;
  Queue(shard, std::move(part));
}

void PartPusher::SendPull(int shard, proto::PullRequest pull) {
  absl::MutexLock lock(&mu_);
  pulls_[shard].emplace_back();
  Queue(shard, std::move(pull));
}

void PartPusher::Queue(int shard, Call call) {
  if (!open_) {
    open_ = true;
    first_send_ = clock_->Now();
    last_answer_ = first_send_;
  }
  queues_[shard].push_back(std::move(call));
  ++outstanding_;
  changed_.SignalAll();
}

void PartPusher::Run(int shard) {
  for (;;) {
    Call call;
    bool send;
    int pull_index = -1;
    {
      absl::MutexLock lock(&mu_);
      while (!stop_ && queues_[shard].empty()) changed_.Wait(&mu_);
      if (queues_[shard].empty()) return;  // stopped
      call = std::move(queues_[shard].front());
      queues_[shard].pop_front();
      send = error_.ok();
      if (std::holds_alternative<proto::PullRequest>(call)) {
        // A shard's pulls leave in the order queued: this is its first
        // slot not started.
        for (int i = 0; i < static_cast<int>(pulls_[shard].size()); ++i) {
          if (!pulls_[shard][i].started) {
            pulls_[shard][i].started = true;
            pull_index = i;
            break;
          }
        }
      }
    }
    absl::Status s;
    proto::PushResponse pushed;
    proto::PullResponse pulled;
    if (send) {
      s = pull_index >= 0
              ? client_->Pull(shard, std::get<proto::PullRequest>(call), &pulled, timeout_)
              : client_->Push(shard, std::get<proto::PushRequest>(call), &pushed, timeout_);
    }
    bool first_error = false;
    {
      absl::MutexLock lock(&mu_);
      if (send) {
        last_answer_ = clock_->Now();
        if (!s.ok()) {
          if (error_.ok()) {
            error_ = s;
            first_error = true;
          }
        } else if (pull_index >= 0) {
          pulls_[shard][pull_index].response = std::move(pulled);
        } else {
          last_[shard] = std::move(pushed);
        }
      }
      if (pull_index >= 0) {
        pulls_[shard][pull_index].done = true;
      } else {
        --pushes_outstanding_;
      }
      --outstanding_;
      changed_.SignalAll();
    }
    // The other shards' calls in flight end now instead of at their timeout
    // (a sync pull waits for a step this worker's push will not complete).
    if (first_error) client_->CancelInFlight();
  }
}

absl::Status PartPusher::Wait(std::vector<proto::PushResponse>* last) {
  absl::MutexLock lock(&mu_);
  while (pushes_outstanding_ > 0) changed_.Wait(&mu_);
  *last = std::exchange(last_, std::vector<proto::PushResponse>(queues_.size()));
  return error_;
}

absl::Status PartPusher::WaitPull(int shard, int index, proto::PullResponse* response) {
  absl::MutexLock lock(&mu_);
  if (shard < 0 || shard >= static_cast<int>(pulls_.size()) || index < 0 ||
      index >= static_cast<int>(pulls_[shard].size()) || pulls_[shard][index].taken) {
    return absl::InvalidArgumentError(
        absl::StrCat("no pull ", index, " of ps:", shard, " to wait for in this round"));
  }
  // By index: a SendPull meanwhile may move the slots.
  while (error_.ok() && !pulls_[shard][index].done) changed_.Wait(&mu_);
  if (!error_.ok()) return error_;
  PullSlot& slot = pulls_[shard][index];
  slot.taken = true;
  *response = std::move(slot.response);
  return absl::OkStatus();
}

absl::Status PartPusher::EndRound(absl::Duration* comm) {
  absl::MutexLock lock(&mu_);
  while (outstanding_ > 0) changed_.Wait(&mu_);
  *comm = open_ ? last_answer_ - first_send_ : absl::ZeroDuration();
  open_ = false;
  for (std::vector<PullSlot>& shard : pulls_) shard.clear();
  last_.assign(queues_.size(), proto::PushResponse());
  return std::exchange(error_, absl::OkStatus());
}

void PartPusher::Abort() {
  {
    absl::MutexLock lock(&mu_);
    if (error_.ok()) error_ = absl::CancelledError("the step's calls were abandoned");
    changed_.SignalAll();  // a WaitPull returns the error now
  }
  // A call that was dequeued before the error but starts after a
  // CancelInFlight runs normally: cancel again until none is left.
  for (;;) {
    client_->CancelInFlight();
    absl::MutexLock lock(&mu_);
    if (outstanding_ == 0) break;
    changed_.WaitWithTimeout(&mu_, absl::Milliseconds(20));
    if (outstanding_ == 0) break;
  }
}

}  // namespace ps_client
}  // namespace psc
