#include "common/ps_client/part_pusher.h"

#include <utility>

namespace psc {
namespace ps_client {

PartPusher::PartPusher(ParameterClient* client, absl::Duration timeout, base::Clock* clock)
    : client_(client), timeout_(timeout), clock_(clock != nullptr ? clock : &real_clock_) {
  const int shards = client_->num_shards();
  {
    absl::MutexLock lock(&mu_);
    queues_.resize(shards);
    last_.resize(shards);
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
  if (!open_) {
    open_ = true;
    first_send_ = clock_->Now();
    last_answer_ = first_send_;
  }
  queues_[shard].push_back(std::move(part));
  ++outstanding_;
  changed_.SignalAll();
}

void PartPusher::Run(int shard) {
  for (;;) {
    proto::PushRequest part;
    bool send;
    {
      absl::MutexLock lock(&mu_);
      while (!stop_ && queues_[shard].empty()) changed_.Wait(&mu_);
      if (queues_[shard].empty()) return;  // stopped
      part = std::move(queues_[shard].front());
      queues_[shard].pop_front();
      send = error_.ok();
    }
    proto::PushResponse response;
    absl::Status s = send ? client_->Push(shard, part, &response, timeout_) : absl::OkStatus();
    bool first_error = false;
    {
      absl::MutexLock lock(&mu_);
      if (send) {
        last_answer_ = clock_->Now();
        if (s.ok()) {
          last_[shard] = std::move(response);
        } else if (error_.ok()) {
          error_ = s;
          first_error = true;
        }
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
  while (outstanding_ > 0) changed_.Wait(&mu_);
  last_comm_ = open_ ? last_answer_ - first_send_ : absl::ZeroDuration();
  open_ = false;
  *last = std::exchange(last_, std::vector<proto::PushResponse>(queues_.size()));
  return std::exchange(error_, absl::OkStatus());
}

absl::Duration PartPusher::last_comm() const {
  absl::MutexLock lock(&mu_);
  return last_comm_;
}

}  // namespace ps_client
}  // namespace psc
