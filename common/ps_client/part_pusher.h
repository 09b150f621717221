// A worker's pushes in parts (worker --overlap; DESIGN.md, "Pushes in
// parts"): the parts of one step, handed over as the backward pass makes
// them, go to their shards while the caller computes on. Per shard the parts
// go in the order given and one at a time (the next once the shard answered
// the last), which is the order the exactly-once ledger relies on
// (push_ledger.h); the shards are sent to concurrently, one thread each.
//
// The first error wins: the parts not yet sent are dropped, and the calls
// in flight are ended (ParameterClient::CancelInFlight), as PushAll's first
// failing shard cancels the others.
//
// Thread-safe; one step at a time: Send (from any thread) the step's parts,
// then Wait.
#ifndef PSC_COMMON_PS_CLIENT_PART_PUSHER_H_
#define PSC_COMMON_PS_CLIENT_PART_PUSHER_H_

#include <deque>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/base/clock.h"
#include "common/ps_client/parameter_client.h"

namespace psc {
namespace ps_client {

class PartPusher {
 public:
  // `client` (not owned) outlives the pusher; each part may take `timeout`.
  // `clock` (not owned; the system clock when null) times the step's
  // communication.
  PartPusher(ParameterClient* client, absl::Duration timeout, base::Clock* clock = nullptr);
  ~PartPusher();  // after the parts queued are answered

  PartPusher(const PartPusher&) = delete;
  PartPusher& operator=(const PartPusher&) = delete;

  // Queues `part` for `shard` (in [0, num_shards)).
  void Send(int shard, proto::PushRequest part);

  // Waits until every part sent since the last Wait was answered (or
  // dropped after an error). `last` (resized to the shards) gets each
  // shard's answer to its last part: the one that made its push whole, with
  // the variables pulled after it. Returns the first error.
  absl::Status Wait(std::vector<proto::PushResponse>* last);

  // The step Wait ended: from its first Send to its last answer.
  absl::Duration last_comm() const;

 private:
  void Run(int shard);

  ParameterClient* const client_;
  const absl::Duration timeout_;
  base::RealClock real_clock_;
  base::Clock* const clock_;

  mutable absl::Mutex mu_;
  absl::CondVar changed_;  // a part queued or answered, or stop_
  std::vector<std::deque<proto::PushRequest>> queues_ ABSL_GUARDED_BY(mu_);
  std::vector<proto::PushResponse> last_ ABSL_GUARDED_BY(mu_);
  int64_t outstanding_ ABSL_GUARDED_BY(mu_) = 0;  // sent, not yet answered or dropped
  absl::Status error_ ABSL_GUARDED_BY(mu_);
  bool open_ ABSL_GUARDED_BY(mu_) = false;  // a part was sent since the last Wait
  absl::Time first_send_ ABSL_GUARDED_BY(mu_);
  absl::Time last_answer_ ABSL_GUARDED_BY(mu_);
  absl::Duration last_comm_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;

  std::vector<std::thread> threads_;  // one per shard
};

}  // namespace ps_client
}  // namespace psc

#endif  // PSC_COMMON_PS_CLIENT_PART_PUSHER_H_
