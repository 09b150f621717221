// Builds a worker's replicas from its DeviceSetup: one backend per planned
// logical device (the CUDA backend for a GPU, the CPU backend for the CPU),
// checked against every op the model runs, with soft device placement and
// placement logging.
#ifndef PSC_WORKER_REPLICA_BACKENDS_H_
#define PSC_WORKER_REPLICA_BACKENDS_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "common/compute/backend.h"
#include "common/compute/cpu_conv.h"
#include "common/compute/model.h"
#include "worker/device_plan.h"
#include "worker/mirrored_replicas.h"

namespace psc {
namespace worker {

// The replicas of `setup` for `model` (not owned; outlives the result).
// `intra_op_threads` (the job's, 0 = all cores) goes to a lone CPU replica
// (its convolutions by `conv`, the job's --conv_algorithm)
// as it is and is split evenly over several. `replica_batch` is the most
// examples one replica gets in a step (for the capability check).
//
// A GPU replica whose backend cannot be made, or that does not support an
// op, trains on the CPU with a logged warning under
// --soft_device_placement; without it that is an error naming the device
// and the reason (the backend's code, or UNIMPLEMENTED for an op). With
// --log_device_placement every replica's variables and ops are logged with
// their device. An empty plan is the CPU alone.
absl::StatusOr<std::unique_ptr<MirroredReplicas>> CreateReplicas(
    const DeviceSetup& setup, const compute::Model* model, int intra_op_threads,
    int64_t replica_batch, compute::ConvAlgorithm conv = compute::ConvAlgorithm::kAuto);

// Logs each GPU replica's convolution algorithms, one line per shape
// (nothing for CPU replicas).
void LogConvAlgorithms(const MirroredReplicas& replicas);

// Logs what each GPU replica's allocator holds and its peak in use (one
// line per GPU replica; nothing for CPU replicas).
void LogDeviceMemory(const MirroredReplicas& replicas);

}  // namespace worker
}  // namespace psc

#endif  // PSC_WORKER_REPLICA_BACKENDS_H_
