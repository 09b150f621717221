// Gradient buckets for multi_worker_mirrored (as Horovod's tensor fusion
// and PyTorch DDP's buckets): the variables are grouped, in the order their
// gradients become ready in the backward pass (the last layer's first),
// into buckets of about `bucket_bytes`, and each bucket is all-reduced on a
// thread of its own as soon as its last gradient is in, while the backward
// pass goes on with the layers below.
//
// The buckets are fixed at construction from the ready order, so every
// rank issues the same all-reduces in the same order (a collective's
// contract). A step:
//   Begin(collective) -> for each variable v in ready order:
//     copy its gradient into Slot(v), then MarkReady(v) -> Finish(out)
// Finish waits for the last bucket and copies the sums out. One step at a
// time (thread-compatible), the collective used by the reducer's thread
// alone between Begin and Finish.
//
// Timing, per step: `comm` is the all-reduces' own time (on the reducer's
// thread); `exposed` is how long Finish waited for them after the backward
// pass had ended. The part of `comm` the backward pass hid is
// 1 - exposed / comm.
#ifndef PSC_COMMON_COLLECTIVE_BUCKETED_REDUCER_H_
#define PSC_COMMON_COLLECTIVE_BUCKETED_REDUCER_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/base/clock.h"
#include "common/collective/collective.h"

namespace psc {
namespace collective {

struct ReduceTiming {
  absl::Duration comm;     // the all-reduces themselves
  absl::Duration exposed;  // waited for in Finish
};

class BucketedReducer {
 public:
  // PyTorch DDP's default bucket (25 MiB) fuses a small model into one
  // bucket; a smaller one lets the first buckets start early.
  static constexpr int64_t kDefaultBucketBytes = int64_t{256} << 10;

  // `sizes[v]`: the element count of variable v (0 for one that is not
  // reduced, such as a frozen variable: a bucket of only such variables
  // calls no all-reduce); `ready_order`: every variable index once, in the
  // order the backward pass makes them ready.
  // INVALID_ARGUMENT if ready_order is not a permutation, a size is
  // negative, or the total overflows. `clock` (not owned; the system clock
  // when null) times the reductions.
  static absl::StatusOr<std::unique_ptr<BucketedReducer>> Create(
      const std::vector<int64_t>& sizes, const std::vector<int>& ready_order,
      int64_t bucket_bytes = kDefaultBucketBytes, base::Clock* clock = nullptr);
  ~BucketedReducer();

  int num_buckets() const { return static_cast<int>(buckets_.size()); }

  // Starts a step on `collective` (not owned; used until Finish).
  // FAILED_PRECONDITION if a step is open.
  absl::Status Begin(Collective* collective) ABSL_LOCKS_EXCLUDED(mu_);
  // Where variable v's gradient goes for this step.
  absl::Span<float> Slot(int v);
  // v's gradient is in its slot; a bucket whose every variable is ready is
  // handed to the reducer's thread. FAILED_PRECONDITION: no step open, v
  // already ready, or out of ready order (buckets fill in order).
  absl::Status MarkReady(int v) ABSL_LOCKS_EXCLUDED(mu_);
  // Waits for every bucket, then copies the sums into (*grads)[v] (resized
  // to sizes[v]). The first failing all-reduce's error; a step with a
  // variable never marked ready is FAILED_PRECONDITION. The step is closed
  // either way.
  absl::Status Finish(std::vector<std::vector<float>>* grads, ReduceTiming* timing)
      ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Bucket {
    std::vector<int> variables;  // in ready order
    int64_t offset = 0;          // into buffer_, in elements
    int64_t elements = 0;
  };

  BucketedReducer() = default;
  void ReduceLoop() ABSL_LOCKS_EXCLUDED(mu_);

  base::RealClock real_clock_;
  base::Clock* clock_ = &real_clock_;
  std::vector<int64_t> sizes_;
  std::vector<int64_t> offsets_;     // per variable, into buffer_
  std::vector<int> bucket_of_;       // per variable
  std::vector<int> ready_position_;  // per variable: its index in the ready order
  std::vector<Bucket> buckets_;
  std::vector<float> buffer_;
  std::thread thread_;

  absl::Mutex mu_;
  bool open_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  Collective* collective_ ABSL_GUARDED_BY(mu_) = nullptr;
  int next_ready_ ABSL_GUARDED_BY(mu_) = 0;        // position in the ready order
  std::vector<int> pending_ ABSL_GUARDED_BY(mu_);  // per bucket: variables not yet ready
  std::deque<int> queue_ ABSL_GUARDED_BY(mu_);     // buckets to reduce, in order
  int reduced_ ABSL_GUARDED_BY(mu_) = 0;           // buckets done this step
  absl::Status status_ ABSL_GUARDED_BY(mu_);
  absl::Duration comm_ ABSL_GUARDED_BY(mu_);
};

}  // namespace collective
}  // namespace psc

#endif  // PSC_COMMON_COLLECTIVE_BUCKETED_REDUCER_H_
