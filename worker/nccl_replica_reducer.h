// The gradient reduction of mirrored replicas that each run on a GPU of
// their own (MirroredReplicas, mirrored_replicas.h): on the devices, with
// one NCCL all-reduce over the replicas' gradient tensors
// (LocalNcclGroup::AllReduceSumOnDevice, nccl_group.h), all through the GPU
// plugin (gpu_plugin/gpu_api.h), instead of
// copying every replica's gradients to the host and summing them there
// (CombineReplicaGradients). A step, queued on each replica's own stream
// after its backward pass:
//   1. a replica that ran on none of the batch zeroes its gradient tensors
//      (they still hold an earlier step's values), so it adds nothing;
//   2. every other replica scales each moving average's statistic by its
//      share of the batch, counts[r] / n (float32, the weight rounded from
//      double, as CombineReplicaGradients weighs it);
//   3. the all-reduce sums every gradient tensor over the replicas, in
//      place on every GPU, and waits for it;
//   4. replica 0's sums come to the host in one copy.
// The result is CombineReplicaGradients's up to the order of the float32
// additions (NCCL's, not replica order): equal within rounding, not bit for
// bit. With one replica (a single-rank all-reduce) its values come back
// unchanged.
//
// Thread-compatible.
#ifndef PSC_WORKER_NCCL_REPLICA_REDUCER_H_
#define PSC_WORKER_NCCL_REPLICA_REDUCER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/collective/nccl_group.h"
#include "common/compute/backend.h"
#include "common/compute/model.h"
#include "common/gpu_plugin/gpu_api.h"

namespace psc {
namespace worker {

class NcclReplicaReducer {
 public:
  ~NcclReplicaReducer();

  // A reducer over `executors` (executors[r] runs on backends[r]; none
  // owned, all outliving this), through `gpu` (not owned, outliving this).
  // Errors, before any device work:
  //   INVALID_ARGUMENT     no executors, or not one backend per executor
  //   FAILED_PRECONDITION  a backend that is not a CUDA backend, or two
  //                        replicas on one GPU (NCCL takes one rank per
  //                        device), naming the replicas
  // and CreateLocalNcclGroup's when the group does not form.
  static absl::StatusOr<std::unique_ptr<NcclReplicaReducer>> Create(
      gpu::GpuApi* gpu, const compute::Model* model,
      const std::vector<compute::ComputeBackend*>& backends,
      const std::vector<compute::Executor*>& executors);

  // The combination of the executors' last ComputeGradients, replica r
  // having run on counts[r] examples (0: it did not run), into `out`
  // (model.variables() order), as CombineReplicaGradients defines it.
  // Afterwards every executor's gradient tensors hold the combination, so
  // call it once per ComputeGradients (executors[0]->CopyGradients returns
  // the same values again). INVALID_ARGUMENT unless there is one count per
  // replica; FAILED_PRECONDITION when no replica ran (nothing queued); a
  // backend's or LocalNcclGroup's error otherwise, after which the group is
  // unusable and the tensors' contents undefined.
  absl::Status Reduce(const std::vector<int64_t>& counts, std::vector<std::vector<float>>* out);

  // "nccl 2.21.5 on GPUs 0,1"
  std::string Describe() const;

 private:
  struct Replica {
    compute::ComputeBackend* backend = nullptr;
    void* stream = nullptr;                          // the backend's, a cudaStream_t
    std::vector<compute::DeviceTensor*> gradients;   // model.variables() order
    std::vector<compute::DeviceTensor*> statistics;  // the moving averages' among them
    std::vector<float*> data;                        // gradients' device memory
  };

  NcclReplicaReducer() = default;

  // Constant after construction.
  gpu::GpuApi* gpu_ = nullptr;
  compute::Executor* primary_ = nullptr;
  std::vector<Replica> replicas_;
  std::vector<size_t> sizes_;  // floats per gradient tensor
  std::unique_ptr<collective::LocalNcclGroup> group_;
};

}  // namespace worker
}  // namespace psc

#endif  // PSC_WORKER_NCCL_REPLICA_REDUCER_H_
