// A worker's step in parts (worker --push_overlap; DESIGN.md, "Pushes in
// parts" and "Pulls in parts"): the push parts of one step, handed over as
// the backward pass makes them, and after a shard's last part the pulls of
// the next step's parameters, part by part, go to their shards while the
// caller computes on. Per shard the calls go in the order given and one at
// a time (the next once the shard answered the last), which is the order
// the exactly-once ledger relies on (push_ledger.h); the shards are sent to
// concurrently, one thread each.
//
// A round is one step's calls: it opens with its first Send or SendPull and
// ends with EndRound. The round's first error wins: the calls not yet sent
// are dropped, and the calls in flight are ended
// (ParameterClient::CancelInFlight), as PushAll's first failing shard
// cancels the others.
//
// Thread-safe; one round at a time.
#ifndef PSC_COMMON_PS_CLIENT_PART_PUSHER_H_
#define PSC_COMMON_PS_CLIENT_PART_PUSHER_H_

#include <deque>
#include <thread>
#include <variant>
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
  // `client` (not owned) outlives the pusher; each call may take `timeout`.
  // `clock` (not owned; the system clock when null) times the rounds.
  PartPusher(ParameterClient* client, absl::Duration timeout, base::Clock* clock = nullptr);
  ~PartPusher();  // after the calls queued are answered

  PartPusher(const PartPusher&) = delete;
  PartPusher& operator=(const PartPusher&) = delete;

  // Queues push `part` for `shard` (in [0, num_shards)).
  void Send(int shard, proto::PushRequest part);
  // Queues `pull` for `shard` behind what was queued for it; its answer is
  // kept for WaitPull under its index: the count of SendPull calls for that
  // shard in this round before it.
  void SendPull(int shard, proto::PullRequest pull);

  // Waits until every push part sent in this round was answered (or dropped
  // after an error); pulls may still be in flight. `last` (resized to the
  // shards) gets each shard's answer to its last part: the one that made
  // its push whole. Returns the round's first error.
  absl::Status Wait(std::vector<proto::PushResponse>* last);

  // Waits for the answer to pull `index` of `shard` and moves it into
  // `response` (once; INVALID_ARGUMENT for an index never queued or taken
  // before). Returns the round's first error instead if there is one.
  absl::Status WaitPull(int shard, int index, proto::PullResponse* response);

  // Ends the round: waits until every call queued was answered or dropped,
  // sets `comm` to the round's first call to its last answer (zero for a
  // round without calls), forgets the answers not taken, and returns the
  // round's first error.
  absl::Status EndRound(absl::Duration* comm);

  // Fails the round (CANCELLED unless it failed already) without waiting
  // for its calls to finish on their own: the calls not yet sent are
  // dropped and those in flight are ended (a sync pull waiting for a step
  // that will not complete). Returns when none is left; EndRound then ends
  // the round.
  void Abort();

 private:
  using Call = std::variant<proto::PushRequest, proto::PullRequest>;
  struct PullSlot {
    bool started = false;  // dequeued by its shard's thread
    bool done = false;     // answered (response holds the answer) or dropped
    bool taken = false;    // by WaitPull
    proto::PullResponse response;
  };
  void Queue(int shard, Call call) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Run(int shard);

  ParameterClient* const client_;
  const absl::Duration timeout_;
  base::RealClock real_clock_;
  base::Clock* const clock_;

  mutable absl::Mutex mu_;
  absl::CondVar changed_;  // a call queued or answered, or stop_
  std::vector<std::deque<Call>> queues_ ABSL_GUARDED_BY(mu_);
  std::vector<proto::PushResponse> last_ ABSL_GUARDED_BY(mu_);
  std::vector<std::vector<PullSlot>> pulls_ ABSL_GUARDED_BY(mu_);  // per shard, in order
  int64_t pushes_outstanding_ ABSL_GUARDED_BY(mu_) = 0;  // queued, not answered or dropped
  int64_t outstanding_ ABSL_GUARDED_BY(mu_) = 0;         // the same for every call
  absl::Status error_ ABSL_GUARDED_BY(mu_);
  bool open_ ABSL_GUARDED_BY(mu_) = false;  // a call was queued in this round
  absl::Time first_send_ ABSL_GUARDED_BY(mu_);
  absl::Time last_answer_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;

  std::vector<std::thread> threads_;  // one per shard
};

}  // namespace ps_client
}  // namespace psc

#endif  // PSC_COMMON_PS_CLIENT_PART_PUSHER_H_
