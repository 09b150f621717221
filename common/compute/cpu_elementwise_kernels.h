// The CPU backend's kernels of the elementwise ops (elementwise_ops.h):
// the loops of cpu_elementwise.h over the tensors' memory, registered by
// op name.
#ifndef PSC_COMMON_COMPUTE_CPU_ELEMENTWISE_KERNELS_H_
#define PSC_COMMON_COMPUTE_CPU_ELEMENTWISE_KERNELS_H_

#include "absl/status/status.h"
#include "common/compute/cpu_kernel_context.h"
#include "common/compute/kernel_registry.h"

namespace psc {
namespace compute {
namespace cpu {

// Registers Activate, ActivateBackward, Add, Copy, Scale, Multiply,
// Extremum, ExtremumGradient, ReluBackward and CopyBlock into `registry`, bound to `context` (not
// owned; it must outlive the registry's use).
absl::Status RegisterCpuElementwiseKernels(CpuKernelContext* context, KernelRegistry* registry);

}  // namespace cpu
}  // namespace compute
}  // namespace psc

#endif  // PSC_COMMON_COMPUTE_CPU_ELEMENTWISE_KERNELS_H_
