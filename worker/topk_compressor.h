// Top-k sparsified gradients with error feedback (the job's --topk_ratio;
// after Deep Gradient Compression and BytePS): of each trainable shard
// variable a push carries only the k = TopKCount(n, ratio) elements of
// largest magnitude of (gradient + residual), and the residual keeps the
// rest (and the rounding of what was sent to the wire dtype), to be added
// to the next step's gradient. No gradient mass is lost, only delayed. It
// sparsifies the variables the placement declares GRADIENT_TOP_K (the
// chief declares every trainable one under --topk_ratio; a moving
// average's statistic travels dense).
//
// The residuals are worker state: the worker returns them with each unit
// (UnitMetrics.error_feedback), the chief keeps them, records them in
// checkpoints and hands them over with a lost worker's unit to its heir
// (RunUnitRequest.error_feedback), so that a recovered run computes what
// an uninterrupted one does.
//
// Thread-safe.
#ifndef PSC_WORKER_TOPK_COMPRESSOR_H_
#define PSC_WORKER_TOPK_COMPRESSOR_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "proto/common.pb.h"
#include "proto/job.pb.h"

namespace psc {
namespace worker {

class TopKCompressor {
 public:
  // The shard variables of `placement` whose model variable is declared
  // GRADIENT_TOP_K are sparsified at `ratio` (CheckTopKRatio, > 0).
  // INVALID_ARGUMENT for a bad ratio or a shard variable over
  // kMaxSparseElements.
  static absl::StatusOr<std::unique_ptr<TopKCompressor>> Create(double ratio,
                                                                const proto::Placement& placement);

  // Replaces each dense float32 tensor of `tensors` (one shard's, as
  // ShardedParameters::Split makes them) by what travels: sparsified (and
  // its residual updated) or, declared dense, dense; in `wire`.
  // EncodeFloats's errors (float16 out of range), with the residuals left
  // as they were for the tensors not yet encoded.
  absl::Status Encode(proto::DataType wire, std::vector<proto::NamedTensor>* tensors);

  // The residuals, as `worker`'s at `step` (all-zero ones left out).
  proto::ErrorFeedback Save(int worker, int64_t step) const;
  // Replaces the residuals by `feedback`'s (those it leaves out: zero), all
  // or nothing: INVALID_ARGUMENT naming the residual for a name that is not
  // a sparsified shard variable, a size that is not its size, or a tensor
  // that is not finite float32.
  absl::Status Load(const proto::ErrorFeedback& feedback);
  // Every residual zero.
  void Reset();

  double ratio() const { return ratio_; }

 private:
  explicit TopKCompressor(double ratio) : ratio_(ratio) {}

  const double ratio_;
  mutable absl::Mutex mu_;
  // Shard variable name -> residual (its size fixed at Create).
  absl::flat_hash_map<std::string, std::vector<float>> residuals_ ABSL_GUARDED_BY(mu_);
};

}  // namespace worker
}  // namespace psc

#endif  // PSC_WORKER_TOPK_COMPRESSOR_H_
