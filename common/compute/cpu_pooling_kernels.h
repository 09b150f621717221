// The CPU backend's kernels of the pooling ops (pooling_ops.h): the loops
// of cpu_pooling.h and cpu_elementwise.h on the tensors' physical layout (a
// blocked tensor is an NHWC tensor of N*C/b images of b channels, and
// pooling treats channels alike), registered by op name.
#ifndef PSC_COMMON_COMPUTE_CPU_POOLING_KERNELS_H_
#define PSC_COMMON_COMPUTE_CPU_POOLING_KERNELS_H_

#include "absl/status/status.h"
#include "common/compute/cpu_kernel_context.h"
#include "common/compute/kernel_registry.h"

namespace psc {
namespace compute {
namespace cpu {

// Registers MaxPool, MaxPoolBackward, AvgPool, AvgPoolBackward, GlobalPool
// and GlobalPoolBackward into `registry`, bound to `context` (not owned; it
// must outlive the registry's use).
absl::Status RegisterCpuPoolingKernels(CpuKernelContext* context, KernelRegistry* registry);

}  // namespace cpu
}  // namespace compute
}  // namespace psc

#endif  // PSC_COMMON_COMPUTE_CPU_POOLING_KERNELS_H_
