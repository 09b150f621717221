// Which records of a job's training files each replica slot reads in each
// epoch, when the files are streamed (the next part of issue 42): a pure
// function of the seed, the epoch, R and the files' record counts, so a
// sync run is reproducible and a slot whose worker is lost is read again,
// identically, by whoever takes the slot over.
//
// Epoch e shuffles the files by a SplitMix64 permutation seeded from
// (seed, e) into a queue of pieces (file, first record, count). The slots
// read at one rate, batch / R records a step, so the order in which they
// come back to the queue is known: the slot that has read the fewest
// records (the lowest index among equals) takes the piece at the head,
// as much of it as its quota for the epoch (steps_per_epoch x batch / R)
// still needs; what it leaves of a file goes back to the head. As a
// first-come queue of files, but decided ahead: every record is read at
// most once in an epoch, the epoch's steps_per_epoch x batch records
// exactly once, and the rest (fewer than a batch, unless steps_per_epoch
// says fewer steps) not at all. Pure; thread-safe.
#ifndef PSC_COMMON_RECORDS_SHARD_PLAN_H_
#define PSC_COMMON_RECORDS_SHARD_PLAN_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"

namespace psc::records {

struct ShardPlanOptions {
  std::vector<int64_t> records;  // per file, in the files' order; each >= 0
  int64_t batch_size = 0;        // the global batch; R divides it
  int replicas = 1;              // R
  uint64_t seed = 0;
  int64_t steps_per_epoch = 0;  // 0: all records / batch_size
  // false (--noshuffle, fit(shuffle=False)): every epoch's queue holds the
  // files in their order.
  bool shuffle_files = true;
};

// A run of one file's records: [first, first + count).
struct Piece {
  int file = 0;
  int64_t first = 0;
  int64_t count = 0;
  bool operator==(const Piece& o) const {
    return file == o.file && first == o.first && count == o.count;
  }
};

class ShardPlan {
 public:
  // INVALID_ARGUMENT for: no file, a negative count, a total of records
  // over 2^62, batch_size < 1, R < 1 or not dividing batch_size, fewer
  // records than one batch, steps_per_epoch < 0 or over what the records
  // hold.
  static absl::StatusOr<ShardPlan> Create(const ShardPlanOptions& options);

  int64_t steps_per_epoch() const { return steps_per_epoch_; }
  int64_t total_records() const { return total_; }

  // The pieces slot r reads in epoch `epoch`, in order: batch_size / R x
  // steps_per_epoch records in all. `epoch` >= 0 and 0 <= r < R (checked
  // by the caller).
  std::vector<Piece> SlotEpoch(int64_t epoch, int r) const;
  // Every slot's pieces of the epoch (index r).
  std::vector<std::vector<Piece>> Epoch(int64_t epoch) const;
  // The order of the files in epoch `epoch`'s queue (theirs, without
  // shuffle_files).
  std::vector<int> FileOrder(int64_t epoch) const;

 private:
  ShardPlan(ShardPlanOptions options, int64_t total, int64_t steps)
      : options_(std::move(options)), total_(total), steps_per_epoch_(steps) {}

  ShardPlanOptions options_;
  int64_t total_ = 0;
  int64_t steps_per_epoch_ = 0;
};

}  // namespace psc::records

#endif  // PSC_COMMON_RECORDS_SHARD_PLAN_H_
