// Batches gathered ahead of the training loop on a background thread, the C++ counterpart of
// tf.data's `prefetch`: GatherBatch copies a plan's examples out of a Split, and Prefetcher runs it
// for a range of steps through a bounded queue.
#ifndef PSC_COMMON_DATA_PREFETCHER_H_
#define PSC_COMMON_DATA_PREFETCHER_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/data/batch_plan.h"
#include "common/data/dataset.h"

namespace psc::data {

// The examples of one step for one replica slot.
struct Batch {
  int64_t step = 0;
  std::vector<float> images;    // n * height * width, row-major (NHWC with C = 1).
  std::vector<int32_t> labels;  // n entries.
  std::vector<float> weights;   // n entries, or none when the split has none.
  std::vector<float> targets;   // n x the split's target_width (a regression), or none.
};

// Copies the pixels, labels (and weights) of examples `indices` of `split`, in that order, into a
// Batch tagged `step`. INVALID_ARGUMENT if an index is outside [0, split.count) or `split`'s
// vectors do not match its count and shape. Thread-safe (reads `split` only).
absl::StatusOr<Batch> GatherBatch(const Split& split, const std::vector<int64_t>& indices,
                                  int64_t step);

// Produces the batches of steps [first_step, first_step + num_steps) of replica slot r of R on a
// background thread, at most `capacity` batches ahead of the consumer.
//
// Lifecycle: RUNNING (the thread gathers batches and blocks while `capacity` are queued) ->
// DONE (all steps produced, or a step failed; the thread has exited) -> destroyed. The destructor
// moves any state to STOPPED: it wakes the producer and joins it, promptly (within one batch's
// gathering) even if the consumer stopped early.
//
// Thread-safe: Next() may be called from several threads; each batch goes to exactly one caller.
class Prefetcher {
 public:
  // `split` and `plan` are not owned and must outlive this object. Invalid arguments (a null
  // pointer, num_steps < 0, capacity < 1, first_step < 0, or r, R that BatchPlan::Indices rejects)
  // start no thread; Next() then returns INVALID_ARGUMENT.
  Prefetcher(const Split* split, const BatchPlan* plan, int64_t first_step, int64_t num_steps,
             int r, int R, int capacity);
  // The same for batches that `produce` makes, called on the thread with
  // each step in order (a streamed slot's: job/record_stream.h), and a flag
  // the destructor sets: a long production polls it and gives up
  // (CANCELLED). It must outlive this object's thread.
  using Produce = std::function<absl::StatusOr<Batch>(int64_t step, const std::atomic<bool>& stop)>;
  Prefetcher(Produce produce, int64_t first_step, int64_t num_steps, int capacity);
  Prefetcher(const Prefetcher&) = delete;
  Prefetcher& operator=(const Prefetcher&) = delete;
  ~Prefetcher();

  // Blocks until the next batch in step order is ready and returns it. After the last step:
  // OUT_OF_RANGE. If producing a step failed: the batches before it, then that step's error (and
  // the same error on every later call).
  absl::StatusOr<Batch> Next();

 private:
  // INVALID_ARGUMENT for a bad first_step, num_steps or capacity.
  static absl::Status CheckRange(int64_t first_step, int64_t num_steps, int capacity);
  void Start(const absl::Status& invalid);
  void Run();

  // Constant after construction.
  Produce produce_;
  const int64_t first_step_;
  const int64_t num_steps_;
  const size_t capacity_;

  absl::Mutex mu_;
  std::deque<Batch> queue_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;             // Set by the destructor.
  bool producer_done_ ABSL_GUARDED_BY(mu_) = false;    // No more batches will be queued.
  absl::Status producer_status_ ABSL_GUARDED_BY(mu_);  // Why it stopped early, if it did.

  std::atomic<bool> stopping_{false};  // stop_, for the producer to poll
  std::thread thread_;                 // Started last in the constructor; joined in the destructor.
};

}  // namespace psc::data

#endif  // PSC_COMMON_DATA_PREFETCHER_H_
