// The CPU backend's kernel of the softmax cross-entropy (loss_ops.h): a
// loop over the rows in double, registered by op name.
#ifndef PSC_COMMON_COMPUTE_CPU_LOSS_KERNELS_H_
#define PSC_COMMON_COMPUTE_CPU_LOSS_KERNELS_H_

#include "absl/status/status.h"
#include "common/compute/cpu_kernel_context.h"
#include "common/compute/kernel_registry.h"

namespace psc {
namespace compute {
namespace cpu {

// Registers SoftmaxCrossEntropy into `registry`, bound to `context` (not
// owned; it must outlive the registry's use).
absl::Status RegisterCpuLossKernels(CpuKernelContext* context, KernelRegistry* registry);

}  // namespace cpu
}  // namespace compute
}  // namespace psc

#endif  // PSC_COMMON_COMPUTE_CPU_LOSS_KERNELS_H_
