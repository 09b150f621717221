// The CPU backend's kernels of the batch normalization ops
// (batch_norm_ops.h): the loops of cpu_batch_norm.h on the tensors'
// physical layout, registered by op name.
#ifndef PSC_COMMON_COMPUTE_CPU_BATCH_NORM_KERNELS_H_
#define PSC_COMMON_COMPUTE_CPU_BATCH_NORM_KERNELS_H_

#include "absl/status/status.h"
#include "common/compute/cpu_kernel_context.h"
#include "common/compute/kernel_registry.h"

namespace psc {
namespace compute {
namespace cpu {

// Registers BatchNorm, BatchNormInference and BatchNormBackward into
// `registry`, bound to `context` (not owned; it must outlive the
// registry's use).
absl::Status RegisterCpuBatchNormKernels(CpuKernelContext* context, KernelRegistry* registry);

}  // namespace cpu
}  // namespace compute
}  // namespace psc

#endif  // PSC_COMMON_COMPUTE_CPU_BATCH_NORM_KERNELS_H_
