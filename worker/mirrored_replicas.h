// MirroredStrategy inside one worker: one model replica (an Executor on its
// own backend) per logical device. A step splits the worker's batch over the
// replicas (sizes differ by at most one, earlier replicas larger), runs them
// at once (replica 0 on the calling thread, each other on a thread of its
// own), and reduces their gradients locally in replica order, so the worker
// still pushes one gradient per shard.
//
// The reduction is on the host: each replica's gradients come to the host as
// they are done and are summed in replica order (deterministic). The Executor
// keeps its gradient tensors private, so the device-side reduction
// (ReduceIntoOnDevice in cuda_backend.h) is not wired in yet.
//
// With one replica every call goes straight to its Executor: training is bit
// for bit what a lone Executor does. Thread-compatible.
#ifndef PSC_WORKER_MIRRORED_REPLICAS_H_
#define PSC_WORKER_MIRRORED_REPLICAS_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/compute/backend.h"
#include "common/compute/model.h"
#include "worker/device_plan.h"

namespace psc {
namespace worker {

// A replica's backend and the device it runs on (after soft placement).
struct ReplicaBackend {
  LogicalDevice device;
  std::unique_ptr<compute::ComputeBackend> backend;
};

class MirroredReplicas {
 public:
  // `model` is not owned and outlives this. INVALID_ARGUMENT without replicas.
  static absl::StatusOr<std::unique_ptr<MirroredReplicas>> Create(
      const compute::Model* model, std::vector<ReplicaBackend> replicas);

  int size() const { return static_cast<int>(replicas_.size()); }
  const LogicalDevice& device(int replica) const { return replicas_[replica].device; }
  const compute::ComputeBackend& backend(int replica) const { return *replicas_[replica].backend; }

  // Every replica gets the same parameters (model.variables() order).
  absl::Status SetParameters(const std::vector<std::vector<float>>& params);

  // Forward and backward of n = labels.size() examples, split over the
  // replicas; `grad_scale` as in Executor (1/global batch, so the replicas'
  // gradients add up to the batch's). `result` sums the replicas'. The first
  // failing replica's error (in replica order) is returned.
  // The dropout key of the next ComputeGradients (compute::Executor's):
  // its batch's first example is example `first_example` of global step
  // `step`; each replica's share continues from there.
  void SetDropoutKey(uint64_t seed, int64_t step, int64_t first_example) {
    dropout_seed_ = seed;
    dropout_step_ = step;
    dropout_first_ = first_example;
  }

  absl::Status ComputeGradients(absl::Span<const float> images, absl::Span<const int32_t> labels,
                                float grad_scale, compute::StepResult* result);
  // Plans every replica's ops for its share of a step of `batch` examples
  // (the split ComputeGradients makes), so the first step pays no planning.
  absl::Status Prepare(int64_t batch);

  // The gradients of the last ComputeGradients, summed over the replicas.
  absl::Status CopyGradients(std::vector<std::vector<float>>* grads);

  // Replica 0's executor (for evaluation, which needs no split).
  compute::Executor* primary() { return executors_[0].get(); }

 private:
  MirroredReplicas() = default;

  const compute::Model* model_ = nullptr;
  std::vector<ReplicaBackend> replicas_;
  std::vector<std::unique_ptr<compute::Executor>> executors_;
  // Per replica: its share's gradients on the host, and whether it ran.
  std::vector<std::vector<std::vector<float>>> host_grads_;
  std::vector<bool> ran_;
  uint64_t dropout_seed_ = 0;
  int64_t dropout_step_ = 0, dropout_first_ = 0;
};

}  // namespace worker
}  // namespace psc

#endif  // PSC_WORKER_MIRRORED_REPLICAS_H_
