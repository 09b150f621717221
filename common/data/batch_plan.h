// Which training examples each (global step, replica slot) reads: a deterministic, seekable
// version of tf.data's `shuffle(buffer, seed, reshuffle_each_iteration=True).repeat().batch(B)`.
//
// Epoch e (steps [e * steps_per_epoch, (e + 1) * steps_per_epoch)) streams the indices
// 0 .. num_examples-1 through a shuffle buffer of `shuffle_buffer` indices, driven by a
// SplitMix64 generator seeded from (seed, e):
//   fill the buffer with the first min(shuffle_buffer, num_examples) indices; then repeatedly
//   pick a uniform position p in the buffer (unbiased rejection sampling, not
//   std::uniform_int_distribution, whose output differs between standard libraries), emit
//   buffer[p], and replace it with the next index of the stream or, once the stream is
//   exhausted, with the buffer's last element (shrinking it).
// Step s of the epoch takes emitted indices [s * batch_size, (s + 1) * batch_size); the rest of
// the epoch (fewer than batch_size indices unless steps_per_epoch is set lower) is dropped, and the
// next epoch starts with a fresh buffer. Unlike tf.data, whose batches straddle epoch boundaries,
// each epoch is thus independent, so any step can be computed from its epoch alone.
//
// Replica slot r of R takes the r-th contiguous 1/R of the step's batch, so the concatenation of
// slots 0..R-1 is the R = 1 batch: sync training with R replicas reads what one replica over the
// whole batch reads. The result depends only on (options, step, r, R): never on the process, the
// order of calls or the standard library.
#ifndef PSC_COMMON_DATA_BATCH_PLAN_H_
#define PSC_COMMON_DATA_BATCH_PLAN_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace psc::data {

struct BatchPlanOptions {
  int64_t num_examples = 0;        // Examples in the training split; >= 1.
  int64_t batch_size = 0;          // The global batch of one step; 1 <= batch_size <= num_examples.
  int64_t shuffle_buffer = 10000;  // >= 1; 1 means no shuffling.
  uint64_t seed = 0;
  // 0 means num_examples / batch_size (the last partial batch is dropped). If set, must be in
  // [1, num_examples / batch_size]: each epoch then uses only the first steps_per_epoch batches.
  int64_t steps_per_epoch = 0;
};

// Thread-safe: const methods may be called concurrently. Logically immutable; it caches the index
// order of the most recently used epoch behind a mutex, so consecutive steps of one epoch cost
// O(batch) and a step in a new epoch costs O(shuffle_buffer + steps_per_epoch * batch_size) (the
// epoch's index stream; never any images). Movable, not copyable; a moved-from plan may only be
// destroyed or assigned to.
class BatchPlan {
 public:
  // INVALID_ARGUMENT if num_examples < 1, batch_size < 1, batch_size > num_examples,
  // shuffle_buffer < 1, or steps_per_epoch < 0 or > num_examples / batch_size.
  static absl::StatusOr<BatchPlan> Create(const BatchPlanOptions& options);

  BatchPlan(BatchPlan&&) = default;
  BatchPlan& operator=(BatchPlan&&) = default;

  int64_t steps_per_epoch() const { return steps_per_epoch_; }
  int64_t batch_size() const { return options_.batch_size; }
  int64_t num_examples() const { return options_.num_examples; }
  const BatchPlanOptions& options() const { return options_; }

  // The example indices (each in [0, num_examples)) of global step `step` for replica slot `r` of
  // `R`: batch_size / R indices, the slot's contiguous share of the step's batch. The epoch is
  // step / steps_per_epoch(). INVALID_ARGUMENT unless step >= 0, R >= 1, R divides batch_size and
  // 0 <= r < R.
  absl::StatusOr<std::vector<int64_t>> Indices(int64_t step, int r, int R) const;

  // The first steps_per_epoch() * batch_size() indices emitted by epoch `epoch`'s shuffle buffer,
  // computed afresh (no cache). Exposed for tests; `epoch` >= 0.
  std::vector<int64_t> EpochOrder(int64_t epoch) const;

 private:
  struct Cache {
    absl::Mutex mu;
    int64_t epoch ABSL_GUARDED_BY(mu) = -1;
    std::shared_ptr<const std::vector<int64_t>> order ABSL_GUARDED_BY(mu);
  };

  BatchPlan(const BatchPlanOptions& options, int64_t steps_per_epoch);

  // The index order of `epoch`, from the cache or computed (outside the lock) and cached.
  std::shared_ptr<const std::vector<int64_t>> OrderOf(int64_t epoch) const;

  // Constant after construction.
  BatchPlanOptions options_;
  int64_t steps_per_epoch_;
  // Only the pointer is constant; the cache has its own lock.
  std::unique_ptr<Cache> cache_;
};

}  // namespace psc::data

#endif  // PSC_COMMON_DATA_BATCH_PLAN_H_
