// The CPU backend: convolutions and dense layers on oneDNN (Debian's 2.6),
// the rest as plain OpenMP loops. Activations stay in NHWC, the layout
// oneDNN's channels-last kernels use, so no op reorders activations and a
// dense layer reads a flattened NHWC tensor as it is. Kernels are reordered
// from Keras's HWIO into the layout oneDNN picks, once per call. Primitives
// are created once per shape and cached; ReLU is fused as a post-op.
//
// oneDNN throws dnnl::error; every op catches it and returns INTERNAL naming
// the op. Thread-compatible (see backend.h).
#ifndef PSC_COMMON_COMPUTE_CPU_BACKEND_H_
#define PSC_COMMON_COMPUTE_CPU_BACKEND_H_

#include <memory>

#include "absl/status/statusor.h"
#include "common/compute/backend.h"

namespace psc {
namespace compute {

// `threads` >= 1 is the OpenMP (and so oneDNN) thread count every op of
// this backend runs with, on whichever thread calls it (and the calling
// thread's default from then on); 0 keeps the default (all cores). Results
// are reproducible bit for bit for a fixed thread count. INVALID_ARGUMENT
// for threads < 0.
absl::StatusOr<std::unique_ptr<ComputeBackend>> CreateCpuBackend(int threads);

// The thread count the CPU backend runs with.
int CpuBackendThreads();

}  // namespace compute
}  // namespace psc

#endif  // PSC_COMMON_COMPUTE_CPU_BACKEND_H_
