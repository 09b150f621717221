// The CPU backend's kernels of the dense ops (dense_ops.h): oneDNN's
// inner product, its primitives made once per shape and kept by the
// kernels, registered by op name.
#ifndef PSC_COMMON_COMPUTE_CPU_DENSE_KERNELS_H_
#define PSC_COMMON_COMPUTE_CPU_DENSE_KERNELS_H_

#include "absl/status/status.h"
#include "common/compute/cpu_kernel_context.h"
#include "common/compute/kernel_registry.h"

namespace psc {
namespace compute {
namespace cpu {

// Registers Dense, DenseBackwardData and DenseBackwardWeights into
// `registry`, bound to `context` (not owned; it must outlive the
// registry's use). The kernels share a cache of primitives, which the
// registry owns.
absl::Status RegisterCpuDenseKernels(CpuKernelContext* context, KernelRegistry* registry);

}  // namespace cpu
}  // namespace compute
}  // namespace psc

#endif  // PSC_COMMON_COMPUTE_CPU_DENSE_KERNELS_H_
