// The sync aggregation rule (DESIGN.md, "sync"), named after TensorFlow's
// ConditionalAccumulator: a gradient computed on version v counts toward
// step v only. Once replicas_to_aggregate gradients of the current step have
// arrived, the step is complete: the Shard applies its mean once and
// publishes version v + 1. Gradients of older steps are stale (dropped and
// counted by the Shard); with more workers than replicas_to_aggregate the
// extra ones are backups whose late gradients are stale.
//
// The mean is summed in a fixed order, whatever the arrival order (replica
// slot, then worker, unit and step of the push id), then divided by the
// count, in float32: with a fixed cluster shape a sync run is reproducible
// bit for bit.
//
// Under loss scaling a gradient may come flagged as an overflow (its
// worker's whole gradient was not finite): it counts toward the step like
// any other, holds no tensors, and makes the whole step one to skip
// (Step::overflow), as Keras skips a step whose summed gradient is not
// finite.
//
// Thread-compatible: the Shard calls it under its metadata lock; a complete
// Step is the caller's to apply with no lock of the accumulator held.
#ifndef PSC_PS_SERVER_SYNC_ACCUMULATOR_H_
#define PSC_PS_SERVER_SYNC_ACCUMULATOR_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "common/tensor/row_sparse.h"
#include "proto/parameter_server.pb.h"

namespace psc {
namespace ps_server {

class SyncAccumulator {
 public:
  // One gradient: a tensor per variable of the shard, in the shard's order.
  struct Gradient {
    proto::PushId id;
    std::vector<std::string> tensors;  // empty for an overflow
    bool overflow = false;
  };

  // A complete step: the gradients whose mean is applied as one update.
  class Step {
   public:
    Step() = default;
    explicit Step(std::vector<Gradient> gradients);  // sorts them (see above)
    bool empty() const { return gradients_.empty(); }
    int64_t size() const { return static_cast<int64_t>(gradients_.size()); }
    // A gradient of the step overflowed: the step is skipped, and Mean and
    // MeanRows must not be called.
    bool overflow() const;
    // The mean of variable `variable`'s gradients into out[0, n); every
    // gradient's tensor of it holds n floats.
    void Mean(size_t variable, int64_t n, float* out) const;
    // The same of a row-sparse variable (row_gradient.h) of rows of
    // `width`: the union of the gradients' rows, ascending, each the sum of
    // the gradients' values for it in the fixed order over the count (a
    // gradient without the row counts as zeros).
    tensor::RowSparse MeanRows(size_t variable, int64_t width) const;

   private:
    std::vector<Gradient> gradients_;
  };

  enum class Verdict {
    kStale,        // computed on an older step: not accumulated
    kAccumulated,  // waiting for the step's other replicas
    kComplete,     // the step is complete: *step holds it
  };

  // Counts toward step 0 with `replicas` (>= 1) replicas to aggregate.
  explicit SyncAccumulator(int32_t replicas = 1) : replicas_(replicas) {}

  // Adds a gradient computed on `computed_on_version` (at most step(); the
  // Shard refuses one from the future); an `overflow` one without its
  // tensors. On kComplete the step moves into *step and the accumulator
  // counts toward the next one.
  Verdict Add(const proto::PushId& id, int64_t computed_on_version,
              absl::Span<const absl::string_view> tensors, Step* step, bool overflow = false);

  // Changes replicas_to_aggregate at a step boundary (the chief lost a
  // worker); TakeIfComplete then tells whether the step is complete now.
  void set_replicas(int32_t replicas) { replicas_ = replicas; }

  // When the waiting gradients complete the step (at least one, and at least
  // replicas_to_aggregate): moves them into *step, counts toward the next
  // step and returns true.
  bool TakeIfComplete(Step* step);

  // Drops the waiting gradients; returns how many there were.
  int64_t Discard();

  // After a restore: drops the waiting gradients (returns how many) and
  // counts toward `step`.
  int64_t Restart(int64_t step);

  int64_t step() const { return step_; }  // the step gradients count toward
  int64_t pending() const { return static_cast<int64_t>(pending_.size()); }
  int32_t replicas() const { return replicas_; }

 private:
  int32_t replicas_;
  int64_t step_ = 0;
  std::vector<Gradient> pending_;
};

}  // namespace ps_server
}  // namespace psc

#endif  // PSC_PS_SERVER_SYNC_ACCUMULATOR_H_
