// The exactly-once ledger of a shard (DESIGN.md, "Exactly once"): which
// pushes it has already taken, so that a retried or redone push is
// acknowledged (DUPLICATE) and not applied again.
//
// A push id is (worker, unit, step, replica slot). The ledger keeps, per
// (worker, replica slot), a watermark and the few ids above it:
//
//   every id of that key with step <= watermark counts as seen;
//   above the watermark, exactly the ids recorded.
//
// Recording step t of a key moves its watermark to t - 1. That is what the
// protocol guarantees: a worker sends step t + 1 to a shard only once that
// shard answered its push of step t, so when step t arrives, whatever of
// that key is older has arrived too, or is a retry of it. An heir that redoes
// a lost worker's unit pushes under the lost worker's ids (push_as_worker),
// the same sequence of steps: the steps the lost worker had pushed are at or
// below the watermark (duplicates), the rest are new. So the ledger holds at
// most one watermark and one step's ids per key: its size is bounded by the
// workers and replica slots, not by the steps of the job.
//
// A checkpoint stores the watermarks and ids (Save); Restore reads them back,
// and also a checkpoint written before watermarks existed (its list of every
// seen id), so such checkpoints keep restoring.
//
// Thread-compatible: the Shard calls it under its metadata lock.
#ifndef PSC_PS_SERVER_PUSH_LEDGER_H_
#define PSC_PS_SERVER_PUSH_LEDGER_H_

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/container/btree_map.h"
#include "absl/container/btree_set.h"
#include "absl/status/statusor.h"
#include "proto/checkpoint.pb.h"
#include "proto/parameter_server.pb.h"

namespace psc {
namespace ps_server {

// The bounds of what a request or a checkpoint may name (docs/reliability.md,
// "Bounds"): worker indices and replica slots lie in [0, kMaxReplicas),
// replicas_to_aggregate and num_workers in [1, kMaxReplicas], and steps,
// units, versions and clocks in [0, kMaxCount], 2^53: the largest integer
// a JSON number (result files, TensorBoard) holds exactly. Anything outside
// is INVALID_ARGUMENT (DATA_LOSS in a checkpoint).
inline constexpr int32_t kMaxReplicas = 1 << 16;
inline constexpr int64_t kMaxCount = int64_t{1} << 53;

class PushLedger {
 public:
  // Whether `id` was recorded (or lies at or below its key's watermark).
  bool Seen(const proto::PushId& id) const;

  // Records `id` (not Seen) and moves its key's watermark up to
  // id.step() - 1 if that is higher.
  void Record(const proto::PushId& id);

  // The entries held: one watermark per key plus the ids above it. What the
  // ledger's memory grows with.
  int64_t size() const;

  // Appends the ledger to `checkpoint` (its `ledger` field).
  void Save(proto::ShardCheckpoint* checkpoint) const;

  // The ledger of `checkpoint`: its watermarks, or for a checkpoint written
  // before them, every id of its `seen_pushes` recorded in step order.
  // INVALID_ARGUMENT for a negative worker, slot or step (the caller turns
  // it into DATA_LOSS naming the file).
  static absl::StatusOr<PushLedger> Restore(const proto::ShardCheckpoint& checkpoint);

 private:
  using Key = std::pair<int32_t, int32_t>;    // worker, replica slot
  using Above = std::pair<int64_t, int64_t>;  // step, unit
  struct Entry {
    int64_t watermark = -1;  // steps <= watermark count as seen
    absl::btree_set<Above> above;
  };

  absl::btree_map<Key, Entry> entries_;
};

}  // namespace ps_server
}  // namespace psc

#endif  // PSC_PS_SERVER_PUSH_LEDGER_H_
