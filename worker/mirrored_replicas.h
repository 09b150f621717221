// MirroredStrategy inside one worker: one model replica (an Executor on its
// own backend) per logical device. A step splits the worker's batch over the
// replicas (sizes differ by at most one, earlier replicas larger), runs them
// at once (replica 0 on the calling thread, each other on a thread of its
// own), and reduces their gradients locally, so the worker still pushes one
// gradient per shard. Two reductions, chosen at Create:
//
//   - on the GPUs, when there are at least two replicas and each is a CUDA
//     backend on a GPU of its own: the gradients stay on the devices, a
//     moving average's statistics are scaled by each replica's share of the
//     batch there, one NCCL all-reduce sums them in place
//     (NcclReplicaReducer, nccl_replica_reducer.h), and replica 0's sums
//     come to the host once. Equal to the host's combination within float32
//     rounding (NCCL adds in its own order). If the NCCL group does not form
//     at Create, or fails in a step (that step's error), the reduction
//     falls back to the host, with the reason logged;
//   - on the host, otherwise (CPU replicas, a mix, or GPU replicas sharing a
//     GPU as virtual devices): each replica's gradients come to the host as
//     they are done and are summed into the result in replica order
//     (deterministic); a moving average's batch statistics are averaged,
//     weighted by each replica's share of the batch (CombineReplicaGradients).
//
// With one replica every call goes straight to its Executor: training is bit
// for bit what a lone Executor does. Thread-compatible.
#ifndef PSC_WORKER_MIRRORED_REPLICAS_H_
#define PSC_WORKER_MIRRORED_REPLICAS_H_

#include <cstdint>
#include <memory>
#include <optional>
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

// The worker's gradient of a step from its replicas' (CopyGradients):
// replica r ran on counts[r] examples (0: it did not run and is skipped) of
// the n = sum of counts given to ComputeGradients, and per_replica[r] holds
// its host gradients in model.variables() order. Per variable v, in replica
// order:
//   - trainable (moving_averages[v] unset; a missing entry is trainable):
//     the sum of the replicas' gradients (each already scaled by
//     1/global batch, so the sum is the slot's);
//   - moving average (set): the executor's value is the replica's unscaled
//     batch statistic, so the combination is the weighted mean
//     sum_r (counts[r] / n) * stat_r, in float32 with the weight rounded
//     from double.
// With one replica that ran, its values are copied untouched (bit for bit).
// FAILED_PRECONDITION when no replica ran.
absl::Status CombineReplicaGradients(
    const std::vector<const std::vector<std::vector<float>>*>& per_replica,
    const std::vector<int64_t>& counts, const std::vector<std::optional<float>>& moving_averages,
    std::vector<std::vector<float>>* out);

class NcclReplicaReducer;  // nccl_replica_reducer.h

class MirroredReplicas {
 public:
  ~MirroredReplicas();

  // `model` is not owned and outlives this. `gpu` (the GPU plugin's API, not
  // owned; null without it) reduces GPU replicas' gradients on the GPUs.
  // INVALID_ARGUMENT without replicas.
  static absl::StatusOr<std::unique_ptr<MirroredReplicas>> Create(
      const compute::Model* model, std::vector<ReplicaBackend> replicas,
      gpu::GpuApi* gpu = nullptr);

  int size() const { return static_cast<int>(replicas_.size()); }
  const LogicalDevice& device(int replica) const { return replicas_[replica].device; }
  const compute::ComputeBackend& backend(int replica) const { return *replicas_[replica].backend; }
  // The GPU plugin's API the GPU replicas were made with; null without it.
  gpu::GpuApi* gpu() const { return gpu_; }

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

  // `loss` as in Executor; its weights, when given, one per label, are
  // split as the labels are.
  absl::Status ComputeGradients(absl::Span<const float> images, absl::Span<const int32_t> labels,
                                const compute::LossOptions& loss, compute::StepResult* result);
  absl::Status ComputeGradients(absl::Span<const float> images, absl::Span<const int32_t> labels,
                                float grad_scale, compute::StepResult* result) {
    return ComputeGradients(images, labels, compute::LossOptions{grad_scale}, result);
  }
  // Plans every replica's ops for its share of a step of `batch` examples
  // (the split ComputeGradients makes), so the first step pays no planning.
  absl::Status Prepare(int64_t batch);

  // The gradients of the last ComputeGradients, combined over the replicas
  // as CombineReplicaGradients does (summed; a moving average's statistics
  // averaged by the replicas' shares of the batch), on the GPUs or on the
  // host (see above). FAILED_PRECONDITION before any ComputeGradients.
  absl::Status CopyGradients(std::vector<std::vector<float>>* grads);

  // The model's outputs of the last ComputeGradients, the replicas' shares
  // in order (the batch's order), as Executor::CopyOutputs.
  absl::Status CopyOutputs(std::vector<float>* outputs);

  // Where CopyGradients reduces: "on the GPUs (nccl 2.21.5 on GPUs 0,1)",
  // "on the host", or "none (one replica)".
  std::string DescribeReduction() const;

  // Replica 0's executor (for evaluation, which needs no split).
  compute::Executor* primary() { return executors_[0].get(); }

 private:
  MirroredReplicas() = default;

  // Sets device_reducer_ where the replicas qualify; logs why not where a
  // GPU replica is among them.
  void ChooseReduction();

  const compute::Model* model_ = nullptr;
  gpu::GpuApi* gpu_ = nullptr;
  std::vector<ReplicaBackend> replicas_;
  std::vector<std::unique_ptr<compute::Executor>> executors_;
  // The reduction on the GPUs; null: on the host.
  std::unique_ptr<NcclReplicaReducer> device_reducer_;
  // Whether the executors' gradients already hold the last step's
  // reduction (device_reducer_ changes them in place).
  bool reduced_ = false;
  // Per replica (host reduction): its share's gradients on the host; and
  // its number of examples in the last ComputeGradients (0: it did not run).
  std::vector<std::vector<std::vector<float>>> host_grads_;
  std::vector<int64_t> counts_;
  uint64_t dropout_seed_ = 0;
  int64_t dropout_step_ = 0, dropout_first_ = 0;
};

}  // namespace worker
}  // namespace psc

#endif  // PSC_WORKER_MIRRORED_REPLICAS_H_
